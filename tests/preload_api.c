/* The malloc family's contract, run twice by meson: under
 * libhugezero-preload.so (HZ_EXPECT_PRELOAD=1, then large blocks must be
 * hugezero's) and without it (the same assertions hold for glibc, which
 * keeps the tests honest about what C and POSIX require). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#define LARGE (8 * MiB)

static int expect_preload;
/* HUGEZERO_DISABLE=1 under the preload: everything must be glibc's. */
static int expect_passthrough;
/* Under qemu-user, madvise is not passed to the kernel and /proc/self/smaps
 * describes qemu's own mappings: only alignment can be checked there. */
static int under_emulator;

/* Copy the /proc/self/smaps entry of the mapping holding p into out. */
static void smaps_entry(const void *p, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	size_t used = 0;

	out[0] = '\0';
	if (f == NULL)
		fail_msg("cannot read /proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		/* A header line: "lo-hi perms ..."; field lines start "Name:". */
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) {
			if (in)
				break;
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		}
		if (in && used + strlen(line) < size) {
			strcpy(out + used, line);
			used += strlen(line);
		}
	}
	fclose(f);
}

static unsigned long smaps_kb(const char *entry, const char *field)
{
	const char *at = strstr(entry, field);

	return at ? strtoul(at + strlen(field) + 1, NULL, 10) : 0;
}

static int thp_never(void)
{
	return hz_test_thp_mode_is("[never]");
}

/* prctl(PR_SET_VMA_ANON_NAME) works here (CONFIG_ANON_VMA_NAME). */
static int kernel_names_mappings(void)
{
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok;

	if (m == MAP_FAILED)
		return 1;
	ok = prctl(0x53564d41 /* PR_SET_VMA */, 0 /* ANON_NAME */, (unsigned long)m, 4096UL,
		   (unsigned long)"probe") == 0;
	munmap(m, 4096);
	return ok;
}

/* Under the preload a large block starts on a 2 MiB boundary and is hugetlb
 * ("ht"), advised for THP ("hg"), explicitly kept on 4 KiB pages ("nh"),
 * or, fresh under the lazy policy (src/promote.h), without advice but in a
 * mapping named for hugezero ("[anon:hugezero-thp]"); glibc sets none of
 * these. A fresh block written in full holds huge pages: at once when
 * advised, within the promoter's bounded wait when lazy. Without the
 * preload nothing is asserted. */
static void assert_ours(const void *p)
{
	char entry[8192];

	if (!expect_preload)
		return;
	if ((uintptr_t)p % (2u << 20))
		fail_msg("%p is not 2 MiB aligned: not a hugezero block", p);
	if (under_emulator || thp_never())
		return;
	smaps_entry(p, entry, sizeof(entry));
	if (strstr(entry, " hg") || strstr(entry, " ht") || strstr(entry, " nh") ||
	    strstr(entry, "[anon:hugezero-"))
		return;
	/* A lazy block in a kernel without CONFIG_ANON_VMA_NAME carries no
	 * mark at all: its 2 MiB alignment is the evidence (glibc's chunks
	 * start 16 bytes into a page). */
	if (!kernel_names_mappings())
		return;
	fail_msg("%p: mapping is not one of hugezero's (hg, ht, nh or named):\n%s", p, entry);
}

/* 30 s: the promoter ticks every 0.1-2 s and collapses up to 64 pages a
 * tick; on a loaded machine its idle-priority thread waits for a CPU. */
#define PROMOTE_WAIT_S 30

static void assert_huge_pages_present(const void *p)
{
	char entry[8192];

	if (!expect_preload || under_emulator || thp_never())
		return;
	for (int tenths = 0; tenths < PROMOTE_WAIT_S * 10; tenths++) {
		smaps_entry(p, entry, sizeof(entry));
		if (smaps_kb(entry, "AnonHugePages:") >= 2048 ||
		    smaps_kb(entry, "Private_Hugetlb:") >= 2048)
			return;
		usleep(100000);
	}
	fail_msg("%p: written block holds no huge pages after %d s:\n%s", p, PROMOTE_WAIT_S,
		 entry);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (unsigned char)(seed + i / 4096);
	if (n)
		p[n - 1] = (unsigned char)seed;
}

static void check(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i += 4096)
		if (p[i] != (unsigned char)(seed + i / 4096))
			fail_msg("byte %zu changed", i);
}

static int all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void zero_sizes_and_null(void **state)
{
	void *p = malloc(0);

	(void)state;
	free(p);
	free(NULL);
	p = calloc(0, 10);
	free(p);
	p = realloc(NULL, 0);
	free(p);
	assert_int_equal(malloc_usable_size(NULL), 0);
}

/* Called through volatile pointers: compilers warn about the impossible
 * requests this test makes on purpose, and clang may even assume an unused
 * malloc succeeds and drop the call. */
static void *(*volatile do_malloc)(size_t) = malloc;
static void *(*volatile do_calloc)(size_t, size_t) = calloc;
static void *(*volatile do_realloc)(void *, size_t) = realloc;
static void *(*volatile do_reallocarray)(void *, size_t, size_t) = reallocarray;
static void *(*volatile do_pvalloc)(size_t) = pvalloc;

static void overflowing_sizes_fail_with_enomem(void **state)
{
	void *p, *q;

	(void)state;
	errno = 0;
	assert_null(do_calloc(SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(do_calloc(SIZE_MAX, SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(do_malloc(SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(do_malloc(SIZE_MAX - LARGE));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(do_reallocarray(NULL, SIZE_MAX / 2, 4));
	assert_int_equal(errno, ENOMEM);
	p = malloc(LARGE);
	assert_non_null(p);
	errno = 0;
	q = do_realloc(p, SIZE_MAX - 4096);
	assert_null(q);
	assert_int_equal(errno, ENOMEM);
	memset(p, 1, LARGE); /* still valid after the failed realloc */
	free(p);
	errno = 0;
	assert_null(do_pvalloc(SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
}

static void large_blocks_are_huge_page_backed(void **state)
{
	unsigned char *p = malloc(LARGE);

	(void)state;
	assert_non_null(p);
	assert_ours(p);
	/* glibc's mmapped chunks start 16 bytes into a page */
	if (expect_passthrough && (uintptr_t)p % 4096 == 0)
		fail_msg("%p is page aligned: hugezero served it despite HUGEZERO_DISABLE", (void *)p);
	fill(p, LARGE, 7);
	check(p, LARGE, 7);
	assert_huge_pages_present(p);
	assert_true(malloc_usable_size(p) >= LARGE);
	/* usable size is real: every byte of it can be written */
	memset(p, 1, malloc_usable_size(p));
	free(p);
}

/* The perturb byte that MALLOC_PERTURB_ (which meson sets) gave glibc. */
static int perturb_from_environment(void)
{
	const char *v = getenv("MALLOC_PERTURB_");

	return v ? atoi(v) : 0;
}

static void every_alignment_up_to_1g(void **state)
{
	static const size_t sizes[] = { 24, 3 * MiB };

	(void)state;
	/* Without the perturb byte while aligning: glibc serves an alignment
	 * from a chunk of size + alignment and fills all of it, so the 1 GiB
	 * alignments would write 12 GiB of fresh memory (40 s on a VM
	 * instead of 0.1). What this test checks is where blocks start. */
	assert_int_equal(mallopt(M_PERTURB, 0), 1);
	for (size_t s = 0; s < 2; s++) {
		for (size_t align = sizeof(void *); align <= ((size_t)1 << 30); align <<= 1) {
			void *p = NULL;

			assert_int_equal(posix_memalign(&p, align, sizes[s]), 0);
			assert_non_null(p);
			if ((uintptr_t)p % align)
				fail_msg("posix_memalign(%zu, %zu) gave %p", align, sizes[s], p);
			memset(p, 0x5a, sizes[s]);
			if (sizes[s] >= 2 * MiB)
				assert_ours(p);
			free(p);
			p = aligned_alloc(align, sizes[s]);
			assert_non_null(p);
			assert_true((uintptr_t)p % align == 0);
			free(p);
			p = memalign(align, sizes[s]);
			assert_non_null(p);
			assert_true((uintptr_t)p % align == 0);
			free(p);
		}
	}
	assert_int_equal(mallopt(M_PERTURB, perturb_from_environment()), 1);
}

static void invalid_alignments_are_einval(void **state)
{
	static const size_t bad[] = { 0, 1, 3, 4, 12, 24, 3 * MiB, (size_t)1 << 63 | 8 };
	void *p = (void *)0x1;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = posix_memalign(&p, bad[i], LARGE);

		if (ret != EINVAL)
			fail_msg("posix_memalign(align %zu) returned %d", bad[i], ret);
		assert_ptr_equal(p, (void *)0x1); /* untouched on error */
	}
}

static void valloc_and_pvalloc_round_like_glibc(void **state)
{
	void *p = valloc(LARGE + 1);

	(void)state;
	assert_non_null(p);
	assert_true((uintptr_t)p % 4096 == 0);
	assert_true(malloc_usable_size(p) >= LARGE + 1);
	free(p);
	p = pvalloc(LARGE + 1);
	assert_non_null(p);
	assert_true((uintptr_t)p % 4096 == 0);
	assert_true(malloc_usable_size(p) >= LARGE + 4096);
	free(p);
	p = pvalloc(1);
	assert_non_null(p);
	assert_true(malloc_usable_size(p) >= 4096);
	free(p);
}

static void realloc_keeps_data_across_the_threshold(void **state)
{
	unsigned char *p = malloc(MiB);

	(void)state;
	assert_non_null(p);
	fill(p, MiB, 1);
	p = realloc(p, LARGE); /* small -> large */
	assert_non_null(p);
	assert_ours(p);
	check(p, MiB, 1);
	fill(p, LARGE, 2);
	p = realloc(p, 4 * LARGE); /* large -> larger: in place or mremap */
	assert_non_null(p);
	assert_ours(p);
	check(p, LARGE, 2);
	fill(p, 4 * LARGE, 3);
	p = realloc(p, 3 * MiB); /* shrink, still large */
	assert_non_null(p);
	check(p, 3 * MiB, 3);
	p = realloc(p, 100 << 10); /* large -> small */
	assert_non_null(p);
	check(p, 100 << 10, 3);
	free(p);
}

static void realloc_moves_when_blocked(void **state)
{
	unsigned char *a = malloc(LARGE), *b = malloc(LARGE);

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	fill(a, LARGE, 9);
	/* b sits right after a (first fit), so a cannot grow in place */
	a = realloc(a, 16 * LARGE);
	assert_non_null(a);
	assert_ours(a);
	check(a, LARGE, 9);
	memset(a, 4, 16 * LARGE);
	free(a);
	free(b);
}

static void realloc_zero_and_null_behave_like_glibc(void **state)
{
	void *p = malloc(LARGE);

	(void)state;
	assert_non_null(p);
	assert_null(realloc(p, 0)); /* glibc: frees, returns NULL */
	p = realloc(NULL, LARGE);
	assert_non_null(p);
	assert_ours(p);
	free(p);
}

static void calloc_is_zero_after_reuse(void **state)
{
	(void)state;
	for (int i = 0; i < 24; i++) {
		size_t n = (size_t)(2 + i % 5) * MiB + (size_t)i * 4096;
		unsigned char *p = calloc(1, n);

		assert_non_null(p);
		assert_ours(p);
		if (!all_zero(p, n))
			fail_msg("calloc(%zu) round %d returned non-zero memory", n, i);
		memset(p, 0xff, n);
		free(p);
	}
}

static void free_keeps_errno(void **state)
{
	void *p = malloc(LARGE), *q = malloc(100);

	(void)state;
	errno = 4242;
	free(p);
	free(q);
	assert_int_equal(errno, 4242);
}

static void anonymous_mmap_is_thp_aligned(void **state)
{
	size_t len = 6 * MiB + 4096;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *f;

	(void)state;
	assert_true(p != MAP_FAILED);
	if (expect_preload)
		assert_true((uintptr_t)p % (2 * MiB) == 0);
	memset(p, 3, len);
	/* partial unmap and mprotect still work on it */
	assert_int_equal(munmap(p + 2 * MiB, 2 * MiB), 0);
	assert_int_equal(mprotect(p, 4096, PROT_READ), 0);
	assert_int_equal(munmap(p, len), 0);
	/* file and fixed mappings pass through untouched */
	f = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 0, 0);
	if (f != MAP_FAILED)
		munmap(f, 4096);
}

struct worker {
	unsigned seed;
	int failures;
};

static void *churn(void *arg)
{
	struct worker *w = arg;
	unsigned char *slots[16] = { 0 };
	size_t sizes[16] = { 0 };
	unsigned x = w->seed;

	for (int i = 0; i < 4000; i++) {
		unsigned k;

		x = x * 1103515245u + 12345u;
		k = (x >> 8) % 16;
		if (slots[k]) {
			for (size_t j = 0; j < sizes[k]; j += 4096)
				w->failures += slots[k][j] != (unsigned char)(k + w->seed);
			free(slots[k]);
			slots[k] = NULL;
			continue;
		}
		/* sizes around the 2 MiB threshold, and some small ones */
		sizes[k] = (x >> 4) % 4 ? 2 * MiB - 8192 + (x % 16384) : 64 + x % 4096;
		slots[k] = (x >> 12) % 2 ? malloc(sizes[k]) : calloc(1, sizes[k]);
		if (!slots[k]) {
			w->failures++;
			continue;
		}
		for (size_t j = 0; j < sizes[k]; j += 4096)
			slots[k][j] = (unsigned char)(k + w->seed);
	}
	for (int k = 0; k < 16; k++)
		free(slots[k]);
	return NULL;
}

static void eight_threads_mixed_sizes_keep_contents(void **state)
{
	pthread_t t[8];
	struct worker w[8];

	(void)state;
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .seed = (unsigned)i * 7919u + 1, .failures = 0 };
		assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
}

static void *spin_allocating(void *arg)
{
	volatile int *stop = arg;

	while (!*stop)
		free(malloc(3 * MiB));
	return NULL;
}

static void fork_from_threaded_program_child_allocates(void **state)
{
	volatile int stop = 0;
	pthread_t t[2];

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, spin_allocating, (void *)&stop), 0);
	for (int i = 0; i < 50; i++) {
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			char *p = malloc(LARGE), *q = malloc(100);

			_exit(p && q && (memset(p, 1, LARGE), 1) ? 0 : 1);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero_sizes_and_null),
		cmocka_unit_test(overflowing_sizes_fail_with_enomem),
		cmocka_unit_test(large_blocks_are_huge_page_backed),
		cmocka_unit_test(every_alignment_up_to_1g),
		cmocka_unit_test(invalid_alignments_are_einval),
		cmocka_unit_test(valloc_and_pvalloc_round_like_glibc),
		cmocka_unit_test(realloc_keeps_data_across_the_threshold),
		cmocka_unit_test(realloc_moves_when_blocked),
		cmocka_unit_test(realloc_zero_and_null_behave_like_glibc),
		cmocka_unit_test(calloc_is_zero_after_reuse),
		cmocka_unit_test(free_keeps_errno),
		cmocka_unit_test(anonymous_mmap_is_thp_aligned),
		cmocka_unit_test(eight_threads_mixed_sizes_keep_contents),
		cmocka_unit_test(fork_from_threaded_program_child_allocates),
	};
	const char *env = getenv("HZ_EXPECT_PRELOAD");

	expect_preload = env && strcmp(env, "1") == 0;
	under_emulator = getenv("HZ_UNDER_EMULATOR") != NULL;
	expect_passthrough = getenv("HZ_EXPECT_PASSTHROUGH") != NULL;
	if (expect_preload && under_emulator)
		print_message("[  SKIP    ] huge-page checks: qemu-user neither passes madvise "
			      "on nor shows the guest's smaps; alignment only\n");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
