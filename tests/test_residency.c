/* The one residency pass per block (src/prim/memory.c, src/prim/pagemap.c,
 * src/zero.c) on real memory: pages only read (mapped to the shared zero
 * page) are not written yet read zero; PAGEMAP_SCAN failing falls back to
 * mincore with the same zeroing; a program that closes or dup2s over the
 * pagemap fd's number, or forks, keeps correct zeroing and its own fd.
 * Built on the test core (fault injection, src/prim/fault.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#include "prim/fault.h"
#include "prim/memory.h"
#include "prim/pagemap.h"
#include "stats.h"
#include "zero.h"

#define PAGE ((size_t)4096)
#define LEN (8 * MiB)
#define PAGES (LEN / PAGE)

/* 4 KiB pages: the first three quarters written, the last quarter only
 * read (each page then maps the shared zero page). */
static unsigned char *dense_with_read_quarter(void)
{
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	volatile unsigned char sink = 0;

	assert_true(p != MAP_FAILED);
	assert_int_equal(madvise(p, LEN, MADV_NOHUGEPAGE), 0);
	for (size_t i = 0; i < PAGES; i++) {
		if (i < PAGES / 4 * 3)
			p[i * PAGE + i % PAGE] = (unsigned char)(i | 1);
		else
			sink += p[i * PAGE];
	}
	(void)sink;
	return p;
}

static void assert_all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0)
			fail_msg("byte %zu reads %#x after zeroing", i, p[i]);
}

static void need_residency(void)
{
	if (!hz_zero_residency_trusted()) {
		print_message("[  SKIP    ] mincore/MADV_DONTNEED do not behave as on Linux here\n");
		skip();
	}
}

/* PAGEMAP_SCAN of one new page, read first when asked: the number of
 * regions (1 where the scan answers), the first one's categories in *cat. */
static int scan_one_page(bool read_first, uint64_t *cat)
{
	unsigned char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	volatile unsigned char sink;
	struct hz_prim_page_region r[2];
	uintptr_t end;
	int n;

	assert_true(p != MAP_FAILED);
	if (read_first) {
		sink = p[0];
		(void)sink;
	}
	n = hz_prim_pagemap_scan((uintptr_t)p, (uintptr_t)p + PAGE, r, 2, &end);
	*cat = n == 1 ? r[0].categories : 0;
	munmap(p, PAGE);
	return n;
}

/* Is PAGEMAP_SCAN answering here (Linux 6.7+, /proc mounted)? */
static bool pagemap_works(void)
{
	uint64_t cat;

	return scan_one_page(false, &cat) == 1;
}

static void need_pagemap(void)
{
	if (!pagemap_works()) {
		print_message("[  SKIP    ] PAGEMAP_SCAN not available here (before Linux 6.7, or no /proc)\n");
		skip();
	}
}

/* Does a read fault map the shared zero page? Linux does it for private
 * anonymous memory, but a kernel may back every fault with a page of its
 * own (one VM kernel here, Linux 6.18, gives each read-faulted page its
 * own frame): there is then no zero page to skip. */
static void need_zero_page(void)
{
	uint64_t cat;

	if (scan_one_page(true, &cat) != 1 || !(cat & HZ_PAGE_IS_PFNZERO)) {
		print_message("[  SKIP    ] a read fault here maps a page of its own, not the shared "
			      "zero page\n");
		skip();
	}
}

/* The read quarter is on the zero page: skipped, counted, and it reads
 * zero with the rest after zeroing. errno is the caller's throughout. */
static void zero_page_pages_are_not_written(void **state)
{
	uint64_t skipped = hz_stats.zero_page_bytes;
	unsigned char *p;
	size_t w;

	(void)state;
	need_residency();
	need_pagemap();
	need_zero_page();
	p = dense_with_read_quarter();
	errno = 4242;
	w = hz_zero_range((uintptr_t)p, LEN, (uintptr_t)p, HZ_ZERO_ANY);
	assert_int_equal(errno, 4242);
	assert_int_equal(w, LEN / 4 * 3);
	assert_int_equal(hz_stats.zero_page_bytes - skipped, LEN / 4);
	assert_all_zero(p, LEN);
	munmap(p, LEN);
}

/* PAGEMAP_SCAN failing (every call): mincore answers, counting the zero
 * page as resident, so all of the range is written, and it reads zero. */
static void pagemap_failing_falls_back_to_mincore(void **state)
{
	struct hz_prim_fault_rule rule = { .call = HZ_CALL_PAGEMAP, .nth = 1, .error = EIO,
					   .every = true };
	unsigned long mincores = hz_prim_fault_calls(HZ_CALL_MINCORE);
	bool had_pagemap = pagemap_works();
	unsigned char *p;
	size_t w;
	int slot;

	(void)state;
	need_residency();
	p = dense_with_read_quarter();
	slot = hz_prim_fault_arm(&rule);
	assert_true(slot >= 0);
	errno = 4242;
	w = hz_zero_range((uintptr_t)p, LEN, (uintptr_t)p, HZ_ZERO_ANY);
	assert_int_equal(errno, 4242);
	if (had_pagemap)
		assert_true(hz_prim_fault_fired(slot) > 0);
	hz_prim_fault_disarm();
	assert_true(hz_prim_fault_calls(HZ_CALL_MINCORE) > mincores);
	assert_int_equal(w, LEN);
	assert_all_zero(p, LEN);
	munmap(p, LEN);
}

/* The same runs either way on memory without zero pages. */
struct runs {
	unsigned count;
	struct hz_range run[64];
	bool resident[64];
};

static void note_run(void *ctx, struct hz_range run, bool resident)
{
	struct runs *r = ctx;

	if (r->count < 64) {
		r->run[r->count] = run;
		r->resident[r->count] = resident;
	}
	r->count++;
}

static void pagemap_and_mincore_give_the_same_runs(void **state)
{
	struct hz_prim_fault_rule rule = { .call = HZ_CALL_PAGEMAP, .nth = 1, .error = EIO,
					   .every = true };
	struct runs a = { .count = 0 }, b = { .count = 0 };
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	(void)state;
	need_residency();
	assert_true(p != MAP_FAILED);
	assert_int_equal(madvise(p, LEN, MADV_NOHUGEPAGE), 0);
	for (size_t i = 0; i < PAGES; i++)
		if ((i / 97) % 3 != 0 || i % 61 == 0)
			p[i * PAGE] = 1;
	assert_int_equal(hz_prim_residency((uintptr_t)p, LEN, note_run, &a), 0);
	assert_true(hz_prim_fault_arm(&rule) >= 0);
	assert_int_equal(hz_prim_residency((uintptr_t)p, LEN, note_run, &b), 0);
	hz_prim_fault_disarm();
	assert_true(a.count <= 64);
	assert_int_equal(a.count, b.count);
	for (unsigned i = 0; i < a.count; i++) {
		assert_true(a.run[i].start == b.run[i].start && a.run[i].end == b.run[i].end);
		assert_int_equal(a.resident[i], b.resident[i]);
	}
	munmap(p, LEN);
}

/* Write every page, zero, check: the work a program's fd games must not
 * break. */
static void zero_a_written_range(void)
{
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	assert_true(p != MAP_FAILED);
	memset(p, 0x5a, LEN);
	errno = 4242;
	assert_int_equal(hz_zero_range((uintptr_t)p, LEN, (uintptr_t)p, HZ_ZERO_WRITE_ONLY), LEN);
	assert_int_equal(errno, 4242);
	assert_all_zero(p, LEN);
	munmap(p, LEN);
}

static void same_file(int fd, const struct stat *want)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_dev == want->st_dev && st.st_ino == want->st_ino);
}

/* The program dup2s its own file over the fd's number, then closes it:
 * zeroing stays right, the program's fd is neither used nor closed, and
 * the scans get an fd of their own again. */
static void program_taking_the_fd_number_keeps_its_fd(void **state)
{
	struct stat mine;
	int fd, theirs;

	(void)state;
	need_pagemap();
	fd = hz_prim_pagemap_fd();
	assert_true(fd >= 0);
	theirs = open("/dev/null", O_RDONLY);
	assert_true(theirs >= 0);
	assert_int_equal(fstat(theirs, &mine), 0);
	assert_int_equal(dup2(theirs, fd), fd);
	zero_a_written_range();
	same_file(fd, &mine); /* still theirs, still open */
	assert_true(hz_prim_pagemap_fd() >= 0);
	assert_true(hz_prim_pagemap_fd() != fd);
	assert_int_equal(close(fd), 0);
	assert_int_equal(close(theirs), 0);

	/* Closed under us (a daemon closing every fd): opened again. */
	fd = hz_prim_pagemap_fd();
	assert_int_equal(close(fd), 0);
	zero_a_written_range();
	assert_true(pagemap_works());
}

/* A child of fork scans its own memory, not the parent's (the fd it
 * inherited reads the parent's): a mapping made in the child only is
 * mapped, written and zeroed right. */
static void child_of_fork_scans_its_own_memory(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	need_pagemap();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		enum hz_zero_method m;

		if (p == MAP_FAILED)
			_exit(2);
		memset(p, 0x5a, LEN);
		if (hz_zero_choose((uintptr_t)p, LEN, HZ_ZERO_WRITE_ONLY, &m) != 0)
			_exit(3);
		if (hz_zero_with((uintptr_t)p, LEN, 0, m, HZ_ZERO_WRITE_ONLY) != LEN)
			_exit(4);
		for (size_t i = 0; i < LEN; i++)
			if (p[i] != 0)
				_exit(5);
		_exit(pagemap_works() ? 0 : 6);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero_page_pages_are_not_written),
		cmocka_unit_test(pagemap_failing_falls_back_to_mincore),
		cmocka_unit_test(pagemap_and_mincore_give_the_same_runs),
		cmocka_unit_test(program_taking_the_fd_number_keeps_its_fd),
		cmocka_unit_test(child_of_fork_scans_its_own_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
