/* The pre-zero thread's confinement (src/prim/confine.c), on the real
 * kernel: a thread that confines itself keeps doing what the pre-zero
 * thread does (its /proc and /sys reads, mappings, advice, PAGEMAP_SCAN,
 * reading limits) and can do nothing else a hijacker would want (open a
 * file elsewhere, write one, make a socket, signal, exec, ptrace, set a
 * limit, rename itself); glibc's setuid from the main thread still
 * reaches it (glibc aborts a process whose threads disagree); something
 * fatal in it still ends the process (a sanitizer's report); and the
 * real pre-zero thread, started by a freed block, is confined. A layer
 * this kernel refuses to a thread of the test too (seccomp, Landlock) is
 * skipped with its reason, never passed. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

#include "prim/pagemap.h"
#include "prim/prim.h"
#include "prezero_impl.h"
#include "recycle.h"

/* Each outcome: 0, or the errno the call failed with. */
struct outcome {
	unsigned done;
	int read_proc, read_sys, map, advise, scan, get_limit, get_thp, faults;
	int read_etc, create_tmp, socket, signal, exec, trace, set_limit, rename;
	unsigned long long cap_eff;
	int no_new_privs, seccomp_mode;
};

static int result(long ret)
{
	return ret < 0 ? errno : 0;
}

static int read_file(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return errno;
	err = read(fd, buf, sizeof(buf)) < 0 ? errno : 0;
	close(fd);
	return err;
}

/* A status line of this thread: "CapEff:" in hex, the others decimal. */
static unsigned long long own_status(const char *key, int base)
{
	char path[64], line[256];
	unsigned long long v = ~0ull;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/status", (long)syscall(SYS_gettid));
	f = fopen(path, "r");
	if (f == NULL)
		return v;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0)
			v = strtoull(line + strlen(key), NULL, base);
	fclose(f);
	return v;
}

static void *confined(void *arg)
{
	struct outcome *o = arg;
	struct hz_prim_page_region r[2];
	struct rlimit lim;
	uintptr_t end;
	char *argv[] = { "/bin/true", NULL };
	void *p;

	o->done = hz_prim_confine_thread();
	/* What the pre-zero thread does. */
	o->read_proc = read_file("/proc/self/mountinfo");
	o->read_sys = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
	p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	o->map = p == MAP_FAILED ? errno : 0;
	if (p != MAP_FAILED) {
		memset(p, 1, 4 * MiB);
		o->advise = result(madvise(p, 4 * MiB, MADV_DONTNEED));
		o->scan = hz_prim_pagemap_scan((uintptr_t)p, (uintptr_t)p + 4 * MiB, r, 2, &end);
		o->scan = o->scan < 0 ? -o->scan : 0;
		munmap(p, 4 * MiB);
	}
	o->get_limit = result(getrlimit(RLIMIT_AS, &lim));
	o->get_thp = result(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0));
	o->faults = hz_prim_thread_minor_faults() == UINT64_MAX;
	o->cap_eff = own_status("CapEff:", 16);
	o->no_new_privs = (int)own_status("NoNewPrivs:", 10);
	o->seccomp_mode = (int)own_status("Seccomp:", 10);
	/* What it never does. */
	o->read_etc = read_file("/etc/passwd");
	o->create_tmp = result(open("/tmp/hugezero-confine-test", O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	o->socket = result(socket(AF_UNIX, SOCK_STREAM, 0));
	o->signal = result(kill(getppid(), 0));
	o->exec = result(execve(argv[0], argv, NULL));
	o->trace = result(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	o->set_limit = result(setrlimit(RLIMIT_AS, &lim));
	o->rename = result(prctl(PR_SET_NAME, "hijacked", 0, 0, 0));
	return NULL;
}

static struct outcome run_confined(void)
{
	struct outcome o;
	pthread_t t;

	memset(&o, 0xff, sizeof(o));
	assert_int_equal(pthread_create(&t, NULL, confined, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return o;
}

/* Whether this kernel gives a thread of ours a seccomp filter at all (a
 * sandbox above us, or qemu-user, may refuse it). */
static bool seccomp_available(void)
{
	static struct sock_filter allow_all[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, allow_all };
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
			      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0
		      ? 0
		      : 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static bool landlock_available(void)
{
	return syscall(444, NULL, 0, 1u) >= 1;
}

static void confined_thread_keeps_its_own_work(void **state)
{
	struct outcome o = run_confined();
	const unsigned long long setid_caps = (1ull << 6) | (1ull << 7);

	(void)state;
	assert_true(o.done & HZ_CONFINED_NO_NEW_PRIVS);
	assert_true(o.done & HZ_CONFINED_CAPABILITIES);
	assert_int_equal(o.no_new_privs, 1);
	assert_int_equal(o.cap_eff & ~setid_caps, 0);
	assert_int_equal(o.read_proc, 0);
	assert_int_equal(o.read_sys, 0);
	assert_int_equal(o.map, 0);
	assert_int_equal(o.advise, 0);
	/* PAGEMAP_SCAN: allowed where the kernel has it (ENOTTY before 6.7). */
	assert_true(o.scan == 0 || o.scan == ENOTTY || o.scan == ENOENT || o.scan == EINVAL);
	assert_int_equal(o.get_limit, 0);
	assert_int_equal(o.get_thp, 0);
	assert_int_equal(o.faults, 0); /* its count of faults (getrusage) reads */
}

static void seccomp_refuses_what_the_thread_never_does(void **state)
{
	struct outcome o;

	(void)state;
	if (!seccomp_available()) {
		print_message("[  SKIP    ] this kernel or a sandbox refuses seccomp filters here\n");
		skip();
	}
	o = run_confined();
	assert_true(o.done & HZ_CONFINED_SECCOMP);
	assert_int_equal(o.seccomp_mode, 2);
	assert_int_equal(o.socket, EPERM);
	assert_int_equal(o.signal, EPERM);
	assert_int_equal(o.exec, EPERM);
	assert_int_equal(o.trace, EPERM);
	assert_int_equal(o.set_limit, EPERM);
	assert_int_equal(o.rename, EPERM);
}

static void landlock_refuses_files_elsewhere(void **state)
{
	struct outcome o;

	(void)state;
	if (!landlock_available()) {
		print_message("[  SKIP    ] Landlock is not enabled in this kernel\n");
		skip();
	}
	/* A file left by another run (a build where the domain did not
	 * hold) would pass for one made here. */
	unlink("/tmp/hugezero-confine-test");
	o = run_confined();
	assert_true(o.done & HZ_CONFINED_LANDLOCK);
	assert_int_equal(o.read_etc, EACCES);
	assert_int_equal(o.create_tmp, EACCES);
	assert_int_equal(access("/tmp/hugezero-confine-test", F_OK), -1);
}

static void *wait_confined(void *arg)
{
	int *stop = arg;

	hz_prim_confine_thread();
	while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE))
		usleep(1000);
	return (void *)(intptr_t)getuid();
}

/* glibc's setgid and setuid make the same call in every thread and abort
 * when one fails: the confined thread must follow the drop. */
static void glibc_setuid_reaches_the_confined_thread(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	if (geteuid() != 0) {
		print_message("[  SKIP    ] setuid to nobody needs root\n");
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int stop = 0;
		pthread_t t;
		void *uid;

		alarm(10);
		if (pthread_create(&t, NULL, wait_confined, &stop) != 0)
			_exit(2);
		usleep(50000);
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		pthread_join(t, &uid);
		_exit((intptr_t)uid == 65534 ? 0 : 4);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void *confined_then_fatal(void *arg)
{
	(void)arg;
	if (!(hz_prim_confine_thread() & HZ_CONFINED_SECCOMP))
		_exit(4); /* no filter: nothing tested */
	syscall(SYS_exit_group, 7);
	return NULL; /* refused */
}

/* Something fatal in the confined thread ends the process from there, as
 * a sanitizer's report does (ThreadSanitizer's halt_on_error calls
 * exit_group): refused, its runtime recursed until the stack ran out and
 * the process died of SIGSEGV with its report unwritten. */
static void a_confined_thread_can_end_its_process(void **state)
{
	pid_t pid;
	int st;

	(void)state;
	if (!seccomp_available()) {
		print_message("[  SKIP    ] this kernel or a sandbox refuses seccomp filters here\n");
		skip();
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t t;

		alarm(10);
		if (pthread_create(&t, NULL, confined_then_fatal, NULL) != 0)
			_exit(2);
		pthread_join(t, NULL);
		_exit(3); /* the thread's exit_group was refused */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 7);
}

/* The real pre-zero thread, started by a freed block, confines itself. */
static void prezero_thread_is_confined(void **state)
{
	size_t len = 16u << 20;
	unsigned long long nnp = ~0ull;
	int tid = 0;
	char path[64], line[256];
	FILE *f;
	void *p;

	(void)state;
	assert_int_equal(hz_recycle_alloc(len, 0, false, &p), 0);
	memset(p, 1, len);
	hz_recycle_free(p);
	for (int i = 0; i < 200 && nnp != 1; i++) {
		usleep(10000);
		tid = __atomic_load_n(&pz_tid, __ATOMIC_ACQUIRE);
		if (tid == 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "NoNewPrivs:", 11) == 0)
				nnp = strtoull(line + 11, NULL, 10);
		fclose(f);
	}
	if (tid == 0) {
		print_message("[  SKIP    ] the pre-zero thread did not start (HUGEZERO_PREZERO?)\n");
		skip();
	}
	assert_int_equal(nnp, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(confined_thread_keeps_its_own_work),
		cmocka_unit_test(seccomp_refuses_what_the_thread_never_does),
		cmocka_unit_test(landlock_refuses_files_elsewhere),
		cmocka_unit_test(glibc_setuid_reaches_the_confined_thread),
		cmocka_unit_test(a_confined_thread_can_end_its_process),
		cmocka_unit_test(prezero_thread_is_confined),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
