/* The system-call layer keeps errno: prim.h promises that its functions
 * return -errno and never change errno, which lets malloc, free and calloc
 * make system calls that fail (a refused madvise, a trim at
 * vm.max_map_count) and still succeed with the program's errno intact.
 * Every call here fails for real, in the kernel; errno must still hold the
 * sentinel afterwards. Then what the memory operations of prim/memory.h
 * do, on real mappings. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "prim/memory.h"
#include "prim/pagemap.h"
#include "prim/prim.h"
#include "util.h"

#define PAGE ((size_t)4096)
/* No call of prim sets errno to this. */
#define SENTINEL EDOM

static void *scratch(void)
{
	void *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

/* The calls made through prim's SYSCALL macro, each failing with EINVAL or
 * EBADF. */
static void failing_calls_keep_errno(void **state)
{
	char *p = scratch();
	unsigned char vec[2];
	char buf[8];
	int ret;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(hz_prim_munmap(p + 1, PAGE), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	ret = hz_prim_madvise(p, PAGE, 12345);
	if (ret == 0) /* qemu-user takes advice as a hint it may ignore */
		print_message("note: unknown madvise advice accepted here (an emulator?)\n");
	else
		assert_int_equal(ret, -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mprotect(p + 1, PAGE, PROT_READ), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mincore(p + 1, PAGE, vec), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_close(-1), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_read(-1, buf, sizeof(buf)), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_write_all(-1, buf, sizeof(buf)), -EBADF);
	assert_int_equal(errno, SENTINEL);
	assert_true(hz_prim_read_file("/nonexistent/hugezero", buf, sizeof(buf)) < 0);
	assert_int_equal(errno, SENTINEL);
	munmap(p, 2 * PAGE);
}

/* The calls that keep errno by hand (mmap and mremap return an address). */
static void failing_mappings_keep_errno(void **state)
{
	char *p = scratch();
	void *out;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(hz_prim_mmap(p + 1, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				      -1, 0, &out), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_mremap(p + 1, PAGE, 2 * PAGE, 0, NULL, &out), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	munmap(p, 2 * PAGE);
}

/* The semantic operations of prim/memory.h, failing the same way. */
static void failing_memory_operations_keep_errno(void **state)
{
	char *p = scratch();
	void *out;

	(void)state;
	errno = SENTINEL;
	/* More than the address space holds. */
	assert_int_equal(hz_prim_map_aligned(SIZE_MAX / 2, (size_t)2 << 20, 0, PROT_READ,
					     MAP_PRIVATE | MAP_ANONYMOUS, HZ_TRIM_BEST_EFFORT, &out),
			 -ENOMEM);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_reserve((size_t)1 << 62, (size_t)1 << 30, &out), -ENOMEM);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(hz_prim_decommit((uintptr_t)p + 1, PAGE), -EINVAL);
	assert_int_equal(errno, SENTINEL);
	/* Mapped already: never replaced. */
	assert_int_equal(hz_prim_reserve_hole((uintptr_t)p, 2 * PAGE), -EEXIST);
	assert_int_equal(errno, SENTINEL);
	assert_int_equal(p[0], 0);
	munmap(p, 2 * PAGE);
}

/* ---- what the memory operations do ---- */

static bool mapped(const void *p, size_t len)
{
	static unsigned char vec[(16 << 20) / 4096];

	return mincore((void *)p, len, vec) == 0;
}

/* The 1 GiB commit tests need a pool that cannot back the commit. */
static void need_empty_1g_pool(void)
{
	char buf[32] = "";
	FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "r");

	if (f != NULL) {
		if (fgets(buf, sizeof(buf), f) == NULL)
			buf[0] = '\0';
		fclose(f);
	}
	if (atol(buf) > 0) {
		print_message("[  SKIP    ] the 1 GiB hugetlb pool has pages here\n");
		skip();
	}
}

/* The checks below read reservations with mincore, which qemu-user refuses
 * on PROT_NONE pages. */
static void need_mincore_on_reservations(void)
{
	void *p = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool works;

	assert_true(p != MAP_FAILED);
	works = mapped(p, PAGE);
	munmap(p, PAGE);
	if (!works) {
		print_message("[  SKIP    ] mincore refuses PROT_NONE pages here (qemu-user)\n");
		skip();
	}
}

/* The congruent variant (exec remap's staging copy): the address is
 * target's modulo the alignment, and exactly len bytes are mapped. */
static void map_aligned_gives_the_congruent_address(void **state)
{
	const uintptr_t targets[] = { 0, 0x12345000, 0x7f00001ff000 };
	void *p;

	(void)state;
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		assert_int_equal(hz_prim_map_aligned(3 * MiB, 2 * MiB, targets[i],
						     PROT_READ | PROT_WRITE,
						     MAP_PRIVATE | MAP_ANONYMOUS,
						     HZ_TRIM_OR_FAIL, &p), 0);
		assert_int_equal(((uintptr_t)p - targets[i]) % (2 * MiB), 0);
		assert_true(mapped(p, 3 * MiB));
		assert_int_equal(munmap(p, 3 * MiB), 0);
	}
	assert_int_equal(hz_prim_reserve(4 * MiB, 1 << 30, &p), 0);
	assert_int_equal((uintptr_t)p % (1 << 30), 0);
	assert_int_equal(munmap(p, 4 * MiB), 0);
}

/* Commit gives read-write zero memory inside a reservation; decommit turns
 * it back into reservation, with its pages gone. */
static void commit_then_decommit_keeps_the_address_space(void **state)
{
	unsigned char vec[512];
	bool advised;
	char *p;

	(void)state;
	need_mincore_on_reservations();
	assert_int_equal(hz_prim_reserve(4 * MiB, 2 * MiB, (void **)&p), 0);
	assert_int_equal(hz_prim_commit((uintptr_t)p, 2 * MiB, HZ_PAGES_SMALL, &advised), 0);
	assert_true(p[0] == 0 && p[2 * MiB - 1] == 0);
	memset(p, 1, 2 * MiB);
	assert_int_equal(hz_prim_decommit((uintptr_t)p, 2 * MiB), 0);
	assert_int_equal(mincore(p, 2 * MiB, vec), 0); /* still mapped */
	assert_int_equal(vec[0] & 1, 0);              /* but not resident */
	assert_int_equal(munmap(p, 4 * MiB), 0);
}

/* Lines of /proc/self/maps that overlap [p, p + len): -1 without /proc. */
static int mappings_over(const void *p, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	uintptr_t a = (uintptr_t)p;
	unsigned long lo, hi;
	char line[512];
	int n = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo < a + len && hi > a)
			n++;
	fclose(f);
	return n;
}

/* Refresh gives the pages of committed memory back and leaves the range
 * read-write and zero, merged with the read-write memory beside it into
 * one mapping, where decommit's PROT_NONE leaves three. */
static void refresh_drops_the_pages_and_merges_with_its_neighbours(void **state)
{
	unsigned char vec[512];
	bool advised;
	char *p;

	(void)state;
	need_mincore_on_reservations();
	assert_int_equal(hz_prim_reserve(6 * MiB, 2 * MiB, (void **)&p), 0);
	assert_int_equal(hz_prim_commit((uintptr_t)p, 6 * MiB, HZ_PAGES_DEFAULT, &advised), 0);
	memset(p, 1, 6 * MiB);
	assert_int_equal(hz_prim_refresh((uintptr_t)p + 2 * MiB, 2 * MiB), 0);
	assert_int_equal(mincore(p + 2 * MiB, 2 * MiB, vec), 0);
	for (size_t i = 0; i < 512; i++)
		assert_int_equal(vec[i] & 1, 0);
	assert_true(p[2 * MiB] == 0 && p[4 * MiB - 1] == 0 && p[2 * MiB - 1] == 1 &&
		    p[4 * MiB] == 1);
	p[3 * MiB] = 2;
	if (mappings_over(p, 6 * MiB) < 0) {
		print_message("[  SKIP    ] no /proc/self/maps to count the mappings in\n");
		skip();
	}
	assert_int_equal(mappings_over(p, 6 * MiB), 1);
	assert_int_equal(hz_prim_decommit((uintptr_t)p + 2 * MiB, 2 * MiB), 0);
	assert_int_equal(mappings_over(p, 6 * MiB), 3);
	assert_int_equal(munmap(p, 6 * MiB), 0);
}

/* A hole in a reservation is reserved again, around a page another thread
 * mapped into it meanwhile, which survives. */
static void reserve_hole_spares_a_mapping_made_in_the_hole(void **state)
{
	uint64_t taken = hz_prim_holes_taken();
	char *p, *other;

	(void)state;
	need_mincore_on_reservations();
	assert_int_equal(hz_prim_reserve(8 * MiB, 2 * MiB, (void **)&p), 0);
	assert_int_equal(munmap(p + 2 * MiB, 4 * MiB), 0);
	assert_int_equal(hz_prim_reserve_hole((uintptr_t)p + 2 * MiB, 2 * MiB), 0);
	assert_true(mapped(p, 4 * MiB));
	other = mmap(p + 5 * MiB, PAGE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	assert_true(other == p + 5 * MiB);
	other[0] = 0x5a;
	assert_int_equal(hz_prim_reserve_hole((uintptr_t)p + 4 * MiB, 2 * MiB), -EEXIST);
	assert_int_equal(other[0], 0x5a);
	assert_true(mapped(p, 8 * MiB));
	assert_int_equal(hz_prim_holes_taken(), taken + 1);
	assert_int_equal(munmap(p, 8 * MiB), 0);
}

/* For real: a hugetlb mapping the 1 GiB pool cannot back fails, and Linux
 * 6.18 has unmapped the range by then. The commit puts the reservation
 * back (nothing else was mapped there: not -EEXIST). */
static void failed_hugetlb_commit_refills_the_hole(void **state)
{
	uint64_t taken = hz_prim_holes_taken();
	bool advised;
	int ret;
	char *p;

	(void)state;
	need_mincore_on_reservations();
	need_empty_1g_pool();
	assert_int_equal(hz_prim_reserve((size_t)1 << 30, (size_t)1 << 30, (void **)&p), 0);
	ret = hz_prim_commit((uintptr_t)p, (size_t)1 << 30, HZ_PAGES_HUGETLB_1G, &advised);
	assert_true(ret < 0 && ret != -EEXIST);
	assert_true(mapped(p, 16 * MiB) && mapped(p + (1 << 30) - 16 * MiB, 16 * MiB));
	assert_int_equal(hz_prim_holes_taken(), taken);
	assert_int_equal(munmap(p, (size_t)1 << 30), 0);
}

/* The populated commit builds hugetlb memory elsewhere: a 1 GiB pool that
 * cannot back it fails the mmap there, and the reservation stays mapped
 * (never unmapped, so never refilled: no hole to be taken meanwhile). */
static void failed_populated_hugetlb_commit_keeps_the_reservation(void **state)
{
	uint64_t taken = hz_prim_holes_taken();
	int ret;
	char *p;

	(void)state;
	need_mincore_on_reservations();
	need_empty_1g_pool();
	assert_int_equal(hz_prim_reserve((size_t)1 << 30, (size_t)1 << 30, (void **)&p), 0);
	ret = hz_prim_commit_populated((uintptr_t)p, (size_t)1 << 30, HZ_PAGES_HUGETLB_1G);
	assert_true(ret < 0 && ret != -EEXIST);
	assert_true(mapped(p, 16 * MiB) && mapped(p + (1 << 30) - 16 * MiB, 16 * MiB));
	assert_int_equal(hz_prim_holes_taken(), taken);
	assert_int_equal(hz_prim_commit_populated((uintptr_t)p, 2 * MiB, HZ_PAGES_THP), -EINVAL);
	assert_int_equal(munmap(p, (size_t)1 << 30), 0);
}

struct runs {
	struct hz_range run[8];
	bool resident[8];
	unsigned count;
};

static void note_run(void *ctx, struct hz_range run, bool resident)
{
	struct runs *r = ctx;

	assert_true(r->count < 8);
	r->run[r->count] = run;
	r->resident[r->count++] = resident;
}

/* Maximal runs, in order, none empty. */
static void residency_walks_maximal_runs(void **state)
{
	struct runs r = { .count = 0 };
	struct hz_prim_discard d;
	uintptr_t a;
	char *p;

	(void)state;
	assert_int_equal(hz_prim_probe_discard(&d), 0);
	if (!d.mincore_works) {
		print_message("[  SKIP    ] mincore does not tell written pages here (an emulator?)\n");
		skip();
	}
	p = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(madvise(p, 8 * PAGE, MADV_NOHUGEPAGE), 0);
	p[0] = p[PAGE] = p[4 * PAGE] = 1;
	a = (uintptr_t)p;
	assert_int_equal(hz_prim_residency(a, 8 * PAGE, note_run, &r), 0);
	assert_int_equal(r.count, 4);
	assert_true(r.resident[0] && !r.resident[1] && r.resident[2] && !r.resident[3]);
	assert_true(r.run[0].start == a && r.run[0].end == a + 2 * PAGE);
	assert_true(r.run[1].end == a + 4 * PAGE && r.run[2].end == a + 5 * PAGE);
	assert_true(r.run[3].end == a + 8 * PAGE);
	munmap(p, 8 * PAGE);
}

/* A hole 24 MiB in: the runs before it are passed (PAGEMAP_SCAN: up to the
 * hole exactly; mincore, asked once for the whole range, fails on all of
 * it: none), nothing of the hole or after it, and the walk says -ENOMEM,
 * never "resident". */
static void residency_stops_at_a_hole(void **state)
{
	const size_t len = 48 << 20, hole = 24 << 20;
	struct runs r = { .count = 0 };
	char *p;

	(void)state;
	if (!hz_test_mincore_sees_holes()) {
		print_message("[  SKIP    ] mincore and madvise do not both fail on an "
			      "unmapped page here (qemu-user)\n");
		skip();
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(munmap(p + hole, PAGE), 0);
	assert_int_equal(hz_prim_residency((uintptr_t)p, len, note_run, &r), -ENOMEM);
	if (hz_prim_pagemap_fd() >= 0) {
		assert_true(r.count >= 1);
		assert_true(r.run[r.count - 1].end == (uintptr_t)p + hole);
	}
	if (r.count > 0) {
		assert_true(r.run[0].start == (uintptr_t)p);
		assert_true(r.run[r.count - 1].end <= (uintptr_t)p + hole);
	}
	assert_false(hz_prim_all_mapped((uintptr_t)p, len));
	assert_true(hz_prim_all_mapped((uintptr_t)p, hole));
	munmap(p, len);
}

/* What the program did to a range (read-only, locked, advised not to
 * fork, a file mapped over part of it) goes with the reset: the range is
 * one plain PROT_NONE reservation again, committed as new memory after. */
static void reset_reservation_drops_what_the_program_did(void **state)
{
	const size_t len = 4 << 20;
	unsigned char vec[1];
	bool advised;
	char *p;
	void *v;

	(void)state;
	need_mincore_on_reservations();
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 7, len);
	assert_int_equal(madvise(p, len / 2, MADV_DONTFORK), 0);
	assert_int_equal(mprotect(p + PAGE, PAGE, PROT_READ), 0);
	(void)mlock(p + 2 * PAGE, PAGE); /* may exceed RLIMIT_MEMLOCK: then not locked */
	v = mmap(p + len / 2, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	assert_true(v == p + len / 2);
	assert_int_equal(hz_prim_reset_reservation((uintptr_t)p, len), 0);
	assert_int_equal(mincore(p, PAGE, vec), 0); /* still ours: mapped */
	assert_false(vec[0] & 1);
	assert_int_equal(hz_prim_commit((uintptr_t)p, len, HZ_PAGES_SMALL, &advised), 0);
	for (size_t off = 0; off < len; off += PAGE)
		assert_int_equal(p[off], 0);
	memset(p, 1, len); /* all writable again */
	munmap(p, len);
}

/* The C library's syscall(), replaced in this program as
 * libhugezero-preload.so replaces it in the program it runs in
 * (src/preload/shim_mmap.c): each call is counted and passed on. prim must
 * reach the kernel without it, or hugezero's own calls would be routed as
 * the program's (its own munmap of a region refused) and the lowest layer
 * would call the highest. */
static unsigned long syscall_symbol_calls;

long syscall(long nr, ...)
{
	static long (*next)(long, ...);
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	__atomic_add_fetch(&syscall_symbol_calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&next, __ATOMIC_RELAXED) == NULL)
		__atomic_store_n(&next, (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall"),
				 __ATOMIC_RELAXED);
	return next(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int thread_done; /* the confined thread's id, once it is done */

/* In a child whose main thread made the exit system call with status 7,
 * the thread left finds itself alone, with that status; while the main
 * thread lived, it did not. It writes what it found to the pipe: the
 * status a process's wait then reports is the kernel's to choose (the
 * leader's or the last thread's, by version). */
static void *report_when_alone(void *arg)
{
	int *pipe_fds = arg, status = -1, before = hz_prim_main_thread_left(&status);
	char verdict = 2; /* never alone */

	__atomic_store_n(&pipe_fds[2], 1, __ATOMIC_RELEASE); /* the main thread may leave */
	for (int i = 0; i < 2000; i++) {
		if (hz_prim_main_thread_left(&status) == 1) {
			verdict = before == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 7;
			break;
		}
		usleep(1000);
	}
	if (write(pipe_fds[1], &verdict, 1) != 1)
		verdict = 3;
	hz_prim_exit_thread(0);
}

static void the_thread_left_knows_the_main_threads_status(void **state)
{
	int status, ret = hz_prim_main_thread_left(&status), fds[3] = { -1, -1, 0 };
	char verdict = -1;
	pid_t pid;

	(void)state;
	if (ret == -EINVAL || ret == -ENOENT) {
		/* No /proc, or qemu-user's own /proc/self/stat: no state
		 * letter, no thread count, 44 fields. */
		print_message("[  SKIP    ] /proc/self/stat is missing or lacks the state, thread "
			      "count or exit code (an emulator's)\n");
		skip();
	}
	assert_int_equal(ret, 0);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t t;

		close(fds[0]);
		if (pthread_create(&t, NULL, report_when_alone, fds) != 0)
			_exit(3);
		while (!__atomic_load_n(&fds[2], __ATOMIC_ACQUIRE))
			usleep(1000);
		hz_prim_exit_thread(7);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &verdict, 1), 1);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(verdict, 1); /* 0: the wrong status; 2: never alone */
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define FAULT_PAGES 16

static void *write_pages(void *arg)
{
	for (size_t i = 0; i < FAULT_PAGES; i++)
		((volatile char *)arg)[i * 4096] = 1;
	return NULL;
}

/* The count the fresh-page timing reads (backing.c): a populate counts its
 * own faults on the calling thread, and none where another thread faulted
 * the pages first. */
static void thread_minor_faults_count_a_populate_and_not_another_threads_writes(void **state)
{
	size_t len = 2 * FAULT_PAGES * 4096;
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t before, after;
	unsigned char resident = 0;
	pthread_t t;

	(void)state;
	assert_true(mem != MAP_FAILED);
	(void)madvise(mem, len, MADV_NOHUGEPAGE); /* 4 KiB faults, one per page */
	before = hz_prim_thread_minor_faults();
	assert_true(before != UINT64_MAX);
	if (madvise(mem, FAULT_PAGES * 4096, MADV_POPULATE_WRITE) != 0) {
		assert_int_equal(errno, EINVAL);
		munmap(mem, len);
		print_message("[  SKIP    ] no MADV_POPULATE_WRITE (Linux before 5.14)\n");
		skip();
	}
	after = hz_prim_thread_minor_faults();
	if (mincore(mem, 4096, &resident) == 0 && !(resident & 1)) {
		munmap(mem, len);
		print_message("[  SKIP    ] MADV_POPULATE_WRITE taken as a hint and ignored "
			      "(qemu-user)\n");
		skip();
	}
	assert_true(after >= before + FAULT_PAGES);
	assert_int_equal(pthread_create(&t, NULL, write_pages, mem + FAULT_PAGES * 4096), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	before = hz_prim_thread_minor_faults();
	assert_int_equal(madvise(mem + FAULT_PAGES * 4096, FAULT_PAGES * 4096, MADV_POPULATE_WRITE),
			 0);
	assert_int_equal(hz_prim_thread_minor_faults(), before);
	munmap(mem, len);
}

/* What only the pre-zero thread does: it lowers its priority, takes a file
 * table of its own and confines itself for good, so on a thread of its
 * own here. */
static void *confine_and_finish(void *arg)
{
	(void)arg;
	(void)hz_prim_lower_thread_priority();
	(void)hz_prim_files_unshare(true);
	(void)hz_prim_confine_thread();
	__atomic_store_n(&thread_done, hz_prim_gettid(), __ATOMIC_RELEASE);
	(void)hz_prim_futex_wake(&thread_done, 1);
	return NULL;
}

/* Every system call of prim, the pre-zero thread's confinement included,
 * with the calls' own results left aside: only the count matters. */
static void prim_reaches_the_kernel_without_the_syscall_symbol(void **state)
{
	unsigned long before = __atomic_load_n(&syscall_symbol_calls, __ATOMIC_RELAXED);
	struct hz_prim_page_region vec[4];
	uint64_t u64a, u64b;
	unsigned major, minor, mode;
	unsigned char resident[2];
	uintptr_t walk_end;
	char buf[256];
	void *p, *q;
	int fd, dup, tid;

	(void)state;
	assert_int_equal(hz_prim_mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p), 0);
	(void)hz_prim_madvise(p, PAGE, MADV_DONTNEED);
	(void)hz_prim_mprotect(p, 2 * PAGE, PROT_READ); /* the whole mapping: one VMA to move */
	(void)hz_prim_munlock(p, PAGE);
	(void)hz_prim_mincore(p, 2 * PAGE, resident);
	(void)hz_prim_name_mapping(p, PAGE, "hz-test");
	(void)hz_prim_pagemap_scan((uintptr_t)p, (uintptr_t)p + 2 * PAGE, vec, 4, &walk_end);
	assert_int_equal(hz_prim_mremap(p, 2 * PAGE, 4 * PAGE, MREMAP_MAYMOVE, NULL, &q), 0);
	assert_int_equal(hz_prim_mmap(NULL, 4 * PAGE, PROT_NONE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &p), 0);
	assert_int_equal(hz_prim_move_mapping(q, 4 * PAGE, p), 0);
	assert_int_equal(hz_prim_munmap(p, 4 * PAGE), 0);
	(void)hz_prim_memory(&u64a, &u64b);
	(void)hz_prim_thp_disable_flags();
	(void)hz_prim_kernel_version(&major, &minor);
	(void)hz_prim_address_space_limit();
	(void)hz_prim_seccomp_mode(&mode);
	(void)hz_prim_read_file("/proc/self/status", buf, sizeof(buf));
	fd = hz_prim_open_read("/proc/self/status");
	assert_true(fd >= 0);
	(void)hz_prim_read(fd, buf, sizeof(buf));
	(void)hz_prim_pread(fd, buf, sizeof(buf), 0);
	(void)hz_prim_file_id(fd, &u64a, &u64b);
	(void)hz_prim_cachestat(fd, 0, PAGE, &u64a);
	(void)hz_prim_fadvise(fd, 0, PAGE, POSIX_FADV_NORMAL);
	dup = hz_prim_dup_cloexec(fd, 100);
	if (dup >= 0)
		assert_int_equal(hz_prim_close(dup), 0);
	assert_int_equal(hz_prim_close(fd), 0);
	(void)hz_prim_write_all(-1, buf, 1);
	(void)hz_prim_getpid();
	(void)hz_prim_thread_known(hz_prim_gettid());
	hz_prim_sleep_ns(1000);
	assert_int_equal(hz_prim_thread_start(confine_and_finish, NULL, 0), 0);
	while ((tid = __atomic_load_n(&thread_done, __ATOMIC_ACQUIRE)) == 0)
		(void)hz_prim_futex_wait(&thread_done, 0, 100 * 1000 * 1000);
	/* Gone, not only done: the next test forks, and a fork while the
	 * thread is still leaving copies the locks its exit holds (under
	 * AddressSanitizer the allocator's: the child's new thread then
	 * waited on one for good, 1 run in 60 on a loaded machine). */
	for (int i = 0; i < 10000 && hz_prim_thread_known(tid); i++)
		hz_prim_sleep_ns(100 * 1000);
	assert_false(hz_prim_thread_known(tid));
	assert_int_equal(__atomic_load_n(&syscall_symbol_calls, __ATOMIC_RELAXED), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(failing_calls_keep_errno),
		cmocka_unit_test(failing_mappings_keep_errno),
		cmocka_unit_test(failing_memory_operations_keep_errno),
		cmocka_unit_test(map_aligned_gives_the_congruent_address),
		cmocka_unit_test(commit_then_decommit_keeps_the_address_space),
		cmocka_unit_test(refresh_drops_the_pages_and_merges_with_its_neighbours),
		cmocka_unit_test(reserve_hole_spares_a_mapping_made_in_the_hole),
		cmocka_unit_test(failed_hugetlb_commit_refills_the_hole),
		cmocka_unit_test(failed_populated_hugetlb_commit_keeps_the_reservation),
		cmocka_unit_test(residency_walks_maximal_runs),
		cmocka_unit_test(residency_stops_at_a_hole),
		cmocka_unit_test(reset_reservation_drops_what_the_program_did),
		cmocka_unit_test(prim_reaches_the_kernel_without_the_syscall_symbol),
		cmocka_unit_test(the_thread_left_knows_the_main_threads_status),
		cmocka_unit_test(thread_minor_faults_count_a_populate_and_not_another_threads_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
