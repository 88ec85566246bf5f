/* The pre-zero thread's file table of its own (hz_prim_files_unshare): it
 * holds none of the program's files (so a pipe the program closes is
 * closed), stderr only when asked; PAGEMAP_SCAN works from it and from the
 * program's threads, each with an fd in its own table; a refused unshare
 * leaves the table shared. Then the real pre-zero thread: its table lists
 * none of the program's fds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "prim/fault.h"
#include "prim/pagemap.h"
#include "prim/prim.h"
#include "prezero_impl.h"
#include "recycle.h"

#define PAGE ((size_t)4096)

/* Open fds of the calling thread, the directory's own fd left out. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/thread-self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	closedir(d);
	return n;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

struct probe {
	bool keep_stderr;
	int ret;
	unsigned private_after;
	int fds;
	bool has_stderr, has_stdin, has_pipe;
	int pipe_fd;
	int scanned; /* hz_prim_pagemap_scan's answer from the thread */
	bool errno_kept;
};

static void *probe_thread(void *arg)
{
	struct probe *p = arg;
	unsigned char *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	struct hz_prim_page_region r[2];
	uintptr_t end;

	errno = 4242;
	p->ret = hz_prim_files_unshare(p->keep_stderr);
	p->errno_kept = errno == 4242;
	p->private_after = hz_prim_files_private();
	p->fds = count_fds();
	p->has_stderr = fd_open(2);
	p->has_stdin = fd_open(0);
	p->has_pipe = fd_open(p->pipe_fd);
	m[0] = 1;
	p->scanned = hz_prim_pagemap_scan((uintptr_t)m, (uintptr_t)m + PAGE, r, 2, &end);
	munmap(m, PAGE);
	return NULL;
}

static void run_probe(struct probe *p)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, probe_thread, p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static int scan_here(void)
{
	unsigned char *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	struct hz_prim_page_region r[2];
	uintptr_t end;
	int n;

	m[0] = 1;
	n = hz_prim_pagemap_scan((uintptr_t)m, (uintptr_t)m + PAGE, r, 2, &end);
	munmap(m, PAGE);
	return n;
}

static void need_unshare(void)
{
	struct probe p = { .pipe_fd = -1 };

	run_probe(&p);
	if (p.ret == -ENOSYS || p.ret == -EPERM) {
		print_message("[  SKIP    ] close_range(CLOSE_RANGE_UNSHARE) refused here (%s; Linux "
			      "5.9+, or a seccomp filter)\n", strerror(-p.ret));
		skip();
	}
}

/* The thread's table holds nothing of the program's: not its pipe, not
 * stdin, not stderr; the program's own table is whole, and a reader of the
 * pipe sees EOF once the program closes its end. */
static void private_table_holds_none_of_the_programs_files(void **state)
{
	struct probe p = { .keep_stderr = false };
	int fds[2];
	char c;

	(void)state;
	need_unshare();
	assert_int_equal(pipe(fds), 0);
	p.pipe_fd = fds[1];
	run_probe(&p);
	assert_int_equal(p.ret, 0);
	assert_true(p.private_after != 0);
	assert_int_equal(hz_prim_files_private(), 0); /* not this thread */
	assert_false(p.has_pipe);
	assert_false(p.has_stdin);
	assert_false(p.has_stderr);
	assert_true(p.fds <= 1); /* at most its pagemap fd, opened after */
	assert_true(fd_open(fds[0]) && fd_open(fds[1]) && fd_open(2));
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 0);
	close(fds[0]);
}

/* keep_stderr: fd 2 stays (the thread's messages), 0 and 1 do not. */
static void private_table_keeps_stderr_when_asked(void **state)
{
	struct probe p = { .keep_stderr = true, .pipe_fd = -1 };

	(void)state;
	need_unshare();
	run_probe(&p);
	assert_int_equal(p.ret, 0);
	assert_true(p.has_stderr);
	assert_false(p.has_stdin);
}

/* PAGEMAP_SCAN answers in the thread with its own table and, afterwards,
 * in this one: each uses an fd of its own table. */
static void pagemap_scans_work_in_both_tables(void **state)
{
	struct probe p = { .pipe_fd = -1 };
	int before = scan_here();

	(void)state;
	need_unshare();
	if (before != 1) {
		print_message("[  SKIP    ] PAGEMAP_SCAN not available here (%d)\n", before);
		skip();
	}
	run_probe(&p);
	assert_int_equal(p.scanned, 1);
	assert_int_equal(scan_here(), 1);
}

/* A refused unshare (seccomp, an old kernel): the error, and the table
 * still shared. */
static void refused_unshare_keeps_the_table_shared(void **state)
{
	struct hz_prim_fault_rule rule = { .call = HZ_CALL_UNSHARE, .nth = 1, .error = ENOSYS };
	struct probe p = { .pipe_fd = 2 };

	(void)state;
	assert_true(hz_prim_fault_arm(&rule) >= 0);
	run_probe(&p);
	hz_prim_fault_disarm();
	assert_true(p.errno_kept);
	assert_int_equal(p.ret, -ENOSYS);
	assert_int_equal(p.private_after, 0);
	assert_true(p.has_pipe && p.has_stdin);
}

/* Whether /proc/self/task/tid/fd lists fd. */
static bool task_has_fd(int tid, int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/fd/%d", tid, fd);
	return access(path, F_OK) == 0;
}

/* The real pre-zero thread, started by a freed block: once it runs, its
 * table lists neither the program's pipe nor stdin. */
static void prezero_thread_holds_none_of_the_programs_files(void **state)
{
	size_t len = 16u << 20;
	int fds[2], tid = 0;
	void *p;

	(void)state;
	need_unshare();
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(hz_recycle_alloc(len, 0, false, &p), 0);
	memset(p, 1, len);
	hz_recycle_free(p);
	for (int i = 0; i < 200 && (tid == 0 || task_has_fd(tid, fds[0])); i++) {
		tid = __atomic_load_n(&pz_tid, __ATOMIC_ACQUIRE);
		usleep(10000);
	}
	if (tid == 0) {
		print_message("[  SKIP    ] the pre-zero thread did not start (HUGEZERO_PREZERO?)\n");
		skip();
	}
	assert_false(task_has_fd(tid, fds[0]));
	assert_false(task_has_fd(tid, fds[1]));
	assert_false(task_has_fd(tid, 0));
	assert_true(task_has_fd(hz_prim_gettid(), fds[0])); /* ours stays */
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused_unshare_keeps_the_table_shared),
		cmocka_unit_test(private_table_holds_none_of_the_programs_files),
		cmocka_unit_test(private_table_keeps_stderr_when_asked),
		cmocka_unit_test(pagemap_scans_work_in_both_tables),
		cmocka_unit_test(prezero_thread_holds_none_of_the_programs_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
