/* What a process may do to itself that depends on how many threads it
 * has, or on which thread a signal reaches. A single-threaded program
 * stays single-threaded for unshare(CLONE_NEWUSER), which the kernel
 * refuses once other threads exist; setuid changes every thread; a signal
 * sent to the process reaches the program; a process ends when its
 * program's last thread does. */
#include "hostile.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 * MiB)

/* The program's large allocations so far: a calloc, and a freed block it
 * had written (work for a background zeroer, if there is one). */
static void allocate_and_free(void)
{
	char *c = calloc(1, BLOCK), *p = malloc(BLOCK);

	CHECK(c && p, "allocation failed");
	memset(p, 1, BLOCK);
	free(p);
	free(c);
}

/* Whether unshare(flags) works for this process at all: tried in a fresh
 * child before any large allocation. */
static void probe_unshare(int flags, const char *name)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(unshare(flags) == 0 ? 0 : errno);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "probe");
	if (WEXITSTATUS(st) != 0)
		SKIP("unshare(%s) is not allowed here: %s", name, strerror(WEXITSTATUS(st)));
}

static int unshare_user(void)
{
	probe_unshare(CLONE_NEWUSER, "CLONE_NEWUSER");
	allocate_and_free();
	CHECK(unshare(CLONE_NEWUSER) == 0, "unshare(CLONE_NEWUSER) after a large free: %s",
	      strerror(errno));
	hostile_use_new_block(BLOCK, true);
	return 0;
}

/* The same, by number: runtimes call syscall(SYS_unshare) where the C
 * library is older than the flag they need. */
static int unshare_user_raw(void)
{
	probe_unshare(CLONE_NEWUSER, "CLONE_NEWUSER");
	allocate_and_free();
	CHECK(syscall(SYS_unshare, CLONE_NEWUSER) == 0,
	      "syscall(SYS_unshare, CLONE_NEWUSER) after a large free: %s", strerror(errno));
	hostile_use_new_block(BLOCK, true);
	return 0;
}

/* As root, in a mount namespace of its own whose /proc is an empty tmpfs
 * (a hardened container): 30 children each recycle blocks and then
 * unshare(CLONE_NEWUSER), which needs a single-threaded process. Nothing
 * may guess from /proc whether a thread has left. */
static int unshare_user_without_proc(void)
{
	if (geteuid() != 0)
		SKIP("mounting over /proc needs root");
	probe_unshare(CLONE_NEWUSER, "CLONE_NEWUSER");
	CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make / private: %s",
	      strerror(errno));
	CHECK(mount("none", "/proc", "tmpfs", 0, NULL) == 0, "tmpfs over /proc: %s",
	      strerror(errno));
	for (int i = 0; i < 30; i++) {
		pid_t pid;

		fflush(NULL);
		pid = fork();
		CHECK(pid >= 0, "fork");
		if (pid == 0) {
			hostile_recycle(16 * MiB, 4, 0);
			if (unshare(CLONE_NEWUSER) != 0) {
				fprintf(stderr, "child %d: unshare(CLONE_NEWUSER): %s\n", i,
					strerror(errno));
				_exit(1);
			}
			_exit(0);
		}
		CHECK(hostile_wait(pid) == 0, "child %d failed", i);
	}
	printf("30 children unshared a user namespace without /proc\n");
	return 0;
}

/* As root: setns into the process's own mount namespace (what a container
 * runtime's helper does to enter one) needs a single-threaded process too:
 * it works after large allocations, twice. */
static int setns_mount(void)
{
	int fd;

	if (geteuid() != 0)
		SKIP("setns(CLONE_NEWNS) needs root");
	fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open /proc/self/ns/mnt: %s", strerror(errno));
	for (int round = 0; round < 2; round++) {
		allocate_and_free();
		CHECK(setns(fd, CLONE_NEWNS) == 0, "setns(CLONE_NEWNS) after a large free: %s",
		      strerror(errno));
	}
	close(fd);
	hostile_use_new_block(BLOCK, true);
	return 0;
}

/* Every thread of the process has uid. */
static void all_threads_have_uid(uid_t uid)
{
	DIR *d = opendir("/proc/self/task");
	const struct dirent *e;

	CHECK(d != NULL, "opendir");
	while ((e = readdir(d)) != NULL) {
		char path[300], line[256];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "Uid:", 4) == 0)
				CHECK((uid_t)atol(line + 4) == uid, "thread %s: %s", e->d_name, line);
		fclose(f);
	}
	closedir(d);
}

/* As root: setuid after large allocations changes every thread. */
static int setuid_after_free(void)
{
	pid_t pid;

	if (geteuid() != 0)
		SKIP("setuid to nobody needs root");
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		allocate_and_free();
		alarm(10); /* a thread that cannot take the set-ID signal hangs it */
		hostile_drop_root();
		all_threads_have_uid(getuid());
		hostile_use_new_block(BLOCK, true);
		exit(0);
	}
	return hostile_wait(pid);
}

static volatile sig_atomic_t received;

static void on_usr1(int sig)
{
	(void)sig;
	received++;
}

/* kill(getpid()) reaches the program's handler, 20 times. */
static int process_signal(void)
{
	struct timespec ms = { 0, 1000 * 1000 };

	signal(SIGUSR1, on_usr1);
	allocate_and_free();
	for (int i = 1; i <= 20; i++) {
		CHECK(kill(getpid(), SIGUSR1) == 0, "kill");
		for (int waited = 0; received < i && waited < 2000; waited++)
			nanosleep(&ms, NULL);
		CHECK(received == i, "signal %d never reached the program", i);
		allocate_and_free();
	}
	return 0;
}

/* ---- the program's last thread ends the process ----
 * glibc ends a process with exit(0), stdio buffers flushed, when the last
 * thread it started leaves, and with the status of the exit system call
 * when the last thread makes that. Each case runs in a child whose
 * recycling has started a background zeroer, if there is one (a note
 * says how many threads it has), and the parent waits 10 s for the child
 * to end: its status and its buffered output are the result. */

static void recycle_then_note_threads(void)
{
	char line[64];
	FILE *f;

	hostile_recycle(BLOCK, 6, 100);
	f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Threads:", 8) == 0)
			NOTE("%.*s", (int)strcspn(line, "\n"), line);
	if (f)
		fclose(f);
}

/* The child's end within 10 s, printed; 0, or 1 when it never ended. */
static int child_ends(pid_t pid)
{
	struct timespec ms = { 0, 1000000L };
	int status;

	for (int waited = 0; waited < 10000; waited++) {
		pid_t got = waitpid(pid, &status, WNOHANG);

		CHECK(got >= 0, "waitpid: %s", strerror(errno));
		if (got == pid) {
			if (WIFSIGNALED(status))
				printf("child killed by signal %d\n", WTERMSIG(status));
			else
				printf("child exit %d\n", WEXITSTATUS(status));
			return 0;
		}
		nanosleep(&ms, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	printf("child still running 10 s after its last thread left\n");
	return 1;
}

/* A child runs leave (which ends its main thread) after recycling; the
 * parent reports how the child ended. */
static int child_leaving(void (*leave)(void))
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		recycle_then_note_threads();
		leave();
		_exit(99); /* leave does not return */
	}
	return child_ends(pid);
}

/* The main thread leaves with pthread_exit, the program's only thread. */
static void leave_by_pthread_exit(void)
{
	printf("child: main thread leaves\n"); /* buffered: a pipe */
	pthread_exit(NULL);
}

static int main_pthread_exit(void)
{
	return child_leaving(leave_by_pthread_exit);
}

static void *recycle_and_return(void *arg)
{
	struct timespec wait = { 0, 200000000L };

	nanosleep(&wait, NULL); /* after the main thread left */
	hostile_recycle(BLOCK, 6, 0);
	printf("child: last thread returns\n");
	return arg;
}

/* The main thread leaves with pthread_exit while another recycles, which
 * then returns from its start routine: the last thread. */
static void leave_before_a_worker(void)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, recycle_and_return, NULL) == 0, "pthread_create");
	leave_by_pthread_exit();
}

static int main_pthread_exit_worker_last(void)
{
	return child_leaving(leave_before_a_worker);
}

/* The same in a child forked by a worker thread: the child's one thread,
 * the worker's copy, is its main thread. */
static void *fork_from_a_worker(void *arg)
{
	*(int *)arg = child_leaving(leave_by_pthread_exit);
	return NULL;
}

static int forked_by_worker_pthread_exit(void)
{
	pthread_t t;
	int ret = 1;

	CHECK(pthread_create(&t, NULL, fork_from_a_worker, &ret) == 0, "pthread_create");
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	return ret;
}

/* The main thread, the program's only one, makes the exit system call
 * (as a runtime of its own may): the process ends with its status. */
static void leave_by_exit_syscall(void)
{
	printf("child: main thread makes the exit system call\n");
	fflush(NULL);
	syscall(SYS_exit, 3);
}

static int main_exit_syscall(void)
{
	return child_leaving(leave_by_exit_syscall);
}

/* The seccomp system call with an instruction of the program's own (no
 * interposer sees it): strict mode for the calling thread. */
static long strict_mode_inline(void)
{
	long ret = -1;
#if defined(__x86_64__)
	__asm__ __volatile__("syscall"
			     : "=a"(ret)
			     : "a"((long)SYS_seccomp), "D"(0L /* SECCOMP_SET_MODE_STRICT */),
			       "S"(0L), "d"(0L)
			     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_seccomp;
	register long x0 __asm__("x0") = 0; /* SECCOMP_SET_MODE_STRICT */
	register long x1 __asm__("x1") = 0;
	register long x2 __asm__("x2") = 0;

	__asm__ __volatile__("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#endif
	return ret;
}

/* The main thread, the program's only one, is killed alone: seccomp's
 * strict mode, entered unseen, kills it at its next call but read, write
 * and exit. The process ends killed by SIGKILL. */
static void leave_killed(void)
{
	printf("child: main thread enters strict mode\n");
	fflush(NULL);
	if (strict_mode_inline() != 0)
		_exit(1);
	getppid(); /* not allowed: the kernel kills the thread */
}

static int main_killed_alone(void)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork(); /* whether strict mode can be entered here */
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		if (strict_mode_inline() != 0)
			_exit(1);
		syscall(SYS_exit, 0); /* allowed in strict mode */
	}
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		SKIP("seccomp strict mode cannot be entered here");
	return child_leaving(leave_killed);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "unshare_user", unshare_user },
		{ "unshare_user_raw", unshare_user_raw },
		{ "unshare_user_without_proc", unshare_user_without_proc },
		{ "setns_mount", setns_mount },
		{ "setuid", setuid_after_free },
		{ "signal", process_signal },
		{ "main_pthread_exit", main_pthread_exit },
		{ "main_pthread_exit_worker_last", main_pthread_exit_worker_last },
		{ "forked_by_worker_pthread_exit", forked_by_worker_pthread_exit },
		{ "main_exit_syscall", main_exit_syscall },
		{ "main_killed_alone", main_killed_alone },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
