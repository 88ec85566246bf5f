/* Runs of small anonymous mmaps share 2 MiB windows (src/preload/pieces.c),
 * under the preload, as CPython's 1 MiB arenas: once a size's pieces have
 * filled a window's worth on 4 KiB pages and were found dense, the next
 * ones come from windows advised MADV_HUGEPAGE. Each piece reads zero,
 * keeps what is written to it, and is never one the program unmapped or
 * mapped over. A size used sparsely gets no window. The meson test sets
 * HUGEZERO_THP_CHECK=0, so that a fresh huge page need not fault faster
 * than 4 KiB pages here. Skipped, with the reason, where THP is not in
 * "madvise" mode or the test runs emulated. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define PIECES 24

static void need_lazy_thp(void)
{
	if (getenv("HZ_UNDER_EMULATOR") || !hz_test_thp_mode_is("[madvise]")) {
		print_message("[  SKIP    ] THP is not in \"madvise\" mode here, or the test runs "
			      "under an emulator\n");
		skip();
	}
}

static unsigned char *map_piece(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* Maps n pieces of len, each read as zero and then written whole. */
static void map_dense(unsigned char **p, int n, size_t len, unsigned seed)
{
	for (int i = 0; i < n; i++) {
		p[i] = map_piece(len);
		assert_int_equal(hz_test_first_nonzero(p[i], len), len);
		hz_test_fill(p[i], len, seed + (unsigned)i);
	}
}

static uint64_t huge_bytes(unsigned char **p, int n, size_t len)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += hz_test_smaps_sum((uintptr_t)p[i], (uintptr_t)p[i] + len, "AnonHugePages:");
	return sum;
}

static void dense_pieces_get_huge_pages_and_keep_their_data(void **state)
{
	unsigned char *p[PIECES];

	(void)state;
	need_lazy_thp();
	map_dense(p, PIECES, MiB, 1);
	for (int i = 0; i < PIECES; i++) {
		assert_int_equal(hz_test_check(p[i], MiB, 1 + (unsigned)i), MiB);
		for (int j = 0; j < i; j++) /* no two pieces overlap */
			assert_true(p[j] + MiB <= p[i] || p[i] + MiB <= p[j]);
	}
	/* Mappings next to each other merge: each piece's mapping is summed
	 * once per piece, so this is an upper bound; any huge page is one of
	 * a window's. */
	if (huge_bytes(p, PIECES, MiB) == 0)
		fail_msg("none of %d dense 1 MiB pieces is on a huge page", PIECES);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(munmap(p[i], MiB), 0);
}

/* Whether the mapping holding p was advised MADV_HUGEPAGE ("hg" in its
 * VmFlags): a window's, as the pieces on 4 KiB pages get no advice. */
static bool advised_huge(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], perms[8];
	unsigned long a, b;
	bool in = false, hg = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3)
			in = a <= (uintptr_t)p && (uintptr_t)p < b;
		else if (in && strncmp(line, "VmFlags:", 8) == 0)
			hg = strstr(line, " hg") != NULL;
	}
	fclose(f);
	return hg;
}

/* A piece that starts a window: its neighbour up to the next 2 MiB is the
 * window's rest, not yet anyone's. */
static unsigned char *window_start(void)
{
	unsigned char *tried[8], *q = NULL;
	int n = 0;

	while (n < 8) {
		q = map_piece(MiB);
		if ((uintptr_t)q % (2 * MiB) == 0 && advised_huge(q))
			break;
		/* Written, as a program writes an arena before it maps the
		 * next: a piece left untouched is judged sparse there. */
		memset(q, 0x11, MiB);
		tried[n++] = q;
		q = NULL;
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(munmap(tried[i], MiB), 0);
	if (!q)
		fail_msg("no window started in 8 pieces of a size used densely");
	return q;
}

/* A program that unmaps more than it mapped (2 MiB from a piece at a
 * window's start) or maps over a window's rest with MAP_FIXED: the next
 * pieces are neither there nor anything but zero. */
static void unmapped_or_mapped_over_rest_is_never_handed_out(void **state)
{
	unsigned char *p[PIECES], *q, *over;

	(void)state;
	need_lazy_thp();
	map_dense(p, PIECES, MiB, 7);
	for (int round = 0; round < 4; round++) {
		q = window_start();
		assert_int_equal(hz_test_first_nonzero(q, MiB), MiB);
		if (round % 2 == 0) {
			/* The program unmaps two windows' worth from q. */
			assert_int_equal(munmap(q, 2 * MiB), 0);
		} else {
			/* The program maps its own page over q's neighbour. */
			over = mmap(q + MiB, MiB, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			assert_ptr_equal(over, q + MiB);
			memset(over, 0x77, MiB);
			memset(q, 0x33, MiB);
		}
		for (int i = 0; i < 4; i++) {
			unsigned char *r = map_piece(MiB);

			if (round % 2 == 1) {
				assert_true(r + MiB <= q || r >= q + 2 * MiB);
				assert_int_equal(over[MiB - 1], 0x77);
			}
			assert_int_equal(hz_test_first_nonzero(r, MiB), MiB);
			memset(r, 0x44, MiB);
			assert_int_equal(munmap(r, MiB), 0);
		}
		if (round % 2 == 1)
			assert_int_equal(munmap(q, 2 * MiB), 0);
	}
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(hz_test_check(p[i], MiB, 7 + (unsigned)i), MiB);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(munmap(p[i], MiB), 0);
}

/* mremap without MREMAP_MAYMOVE grows a window's first piece in place
 * over the window's rest, which is not the program's to be refused by. */
static void a_piece_grows_in_place_over_its_windows_rest(void **state)
{
	unsigned char *p[PIECES], *q;

	(void)state;
	need_lazy_thp();
	map_dense(p, PIECES, MiB, 21);
	q = window_start();
	memset(q, 0x55, MiB);
	assert_ptr_equal(mremap(q, MiB, 2 * MiB, 0), q);
	assert_int_equal(q[MiB - 1], 0x55);
	assert_int_equal(hz_test_first_nonzero(q + MiB, MiB), MiB);
	memset(q + MiB, 0x66, MiB);
	assert_int_equal(munmap(q, 2 * MiB), 0);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(munmap(p[i], MiB), 0);
}

/* Resident 4 KiB pages of [p, p + len), as mincore counts them (a huge
 * page counts whole). */
static size_t resident_pages(const void *p, size_t len)
{
	unsigned char vec[512 * KiB / 4096];
	size_t n = 0;

	assert_true(len <= sizeof(vec) * 4096);
	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n;
}

/* 512 KiB pieces written one byte each: no window, so each piece holds
 * the one page glibc's would, not a share of a huge page. */
static void sparse_pieces_stay_on_small_pages(void **state)
{
	unsigned char *p[PIECES];
	size_t resident = 0;

	(void)state;
	need_lazy_thp();
	if (!hz_test_mincore_sees_holes()) {
		print_message("[  SKIP    ] mincore reports untouched pages resident here\n");
		skip();
	}
	for (int i = 0; i < PIECES; i++) {
		p[i] = map_piece(512 * KiB);
		p[i][0] = 1;
	}
	for (int i = 0; i < PIECES; i++)
		resident += resident_pages(p[i], 512 * KiB);
	if (resident > 2 * PIECES)
		fail_msg("%d sparse 512 KiB pieces hold %zu pages of 4 KiB", PIECES, resident);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(munmap(p[i], 512 * KiB), 0);
}

/* A fork child inherits the windows' rests: its pieces and the parent's
 * are each their own process's, zero when handed out. */
static void a_fork_child_maps_its_own_pieces(void **state)
{
	unsigned char *p[PIECES];
	int status;
	pid_t pid;

	(void)state;
	need_lazy_thp();
	map_dense(p, PIECES / 2, MiB, 11);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		unsigned char *c[PIECES / 2];

		for (int i = 0; i < PIECES / 2; i++) {
			c[i] = mmap(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				    -1, 0);
			if (c[i] == MAP_FAILED || hz_test_first_nonzero(c[i], MiB) != MiB)
				_exit(1);
			hz_test_fill(c[i], MiB, 100 + (unsigned)i);
		}
		for (int i = 0; i < PIECES / 2; i++)
			if (hz_test_check(c[i], MiB, 100 + (unsigned)i) != MiB)
				_exit(2);
		_exit(0);
	}
	map_dense(p + PIECES / 2, PIECES / 2, MiB, 11 + PIECES / 2);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(hz_test_check(p[i], MiB, 11 + (unsigned)i), MiB);
	for (int i = 0; i < PIECES; i++)
		assert_int_equal(munmap(p[i], MiB), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dense_pieces_get_huge_pages_and_keep_their_data),
		cmocka_unit_test(unmapped_or_mapped_over_rest_is_never_handed_out),
		cmocka_unit_test(a_piece_grows_in_place_over_its_windows_rest),
		cmocka_unit_test(sparse_pieces_stay_on_small_pages),
		cmocka_unit_test(a_fork_child_maps_its_own_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
