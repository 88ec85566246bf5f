/* A program's own tasks within its task limits. A process that runs as a
 * service user with RLIMIT_NPROC at the tasks it plans for (the other
 * tasks of its user, its own main thread and one child), or inside a pids cgroup
 * with pids.max 2, can make its one child or thread: fork, pthread_create,
 * clone, syscall(SYS_clone), posix_spawn, system. The kernel counts every
 * task of the process, threads included. Before each call the program
 * writes and frees large blocks of one size a few times (a size that is
 * reused), which under the preload started a pre-zero thread that took the
 * program's one spare task: the call failed with EAGAIN. Three rounds, so
 * a thread that comes back between them is seen too. */
#include "hostile.h"
#include "cgroup.h"

#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 * MiB)
#define ROUNDS 3
#define CHILD_STACK (256 * KiB)

extern char **environ;

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Tasks of real uid uid in processes other than this one. */
static long tasks_of_others(uid_t uid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	long n = 0;

	CHECK(d != NULL, "/proc: %s", strerror(errno));
	while ((e = readdir(d)) != NULL) {
		char path[300], line[256];
		long real = -1, threads = 0;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue; /* exited meanwhile */
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "Uid:", 4) == 0)
				real = strtol(line + 4, NULL, 10);
			else if (strncmp(line, "Threads:", 8) == 0)
				threads = strtol(line + 8, NULL, 10);
		}
		fclose(f);
		if (real == (long)uid)
			n += threads;
	}
	closedir(d);
	return n;
}

/* ---- the ways to make one task; each waits for it ---- */

static void *thread_main(void *arg)
{
	return arg;
}

static int child_main(void *arg)
{
	(void)arg;
	return 0;
}

static void by_fork(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(0);
	CHECK(hostile_wait(pid) == 0, "the forked child failed");
}

static void by_pthread_create(void)
{
	pthread_t t;
	void *ret;
	int err = pthread_create(&t, NULL, thread_main, &err);

	CHECK(err == 0, "pthread_create: %s", strerror(err));
	CHECK(pthread_join(t, &ret) == 0 && ret == &err, "pthread_join");
}

static void by_clone(void)
{
	char *stack = malloc(CHILD_STACK);
	pid_t pid;

	CHECK(stack != NULL, "malloc");
	pid = clone(child_main, stack + CHILD_STACK, SIGCHLD, NULL);
	CHECK(pid >= 0, "clone: %s", strerror(errno));
	CHECK(hostile_wait(pid) == 0, "the cloned child failed");
	free(stack);
}

/* A fork by number, as runtimes make it. */
static void by_raw_clone(void)
{
	long pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);

	CHECK(pid >= 0, "syscall(SYS_clone): %s", strerror(errno));
	if (pid == 0)
		_exit(0);
	CHECK(hostile_wait((pid_t)pid) == 0, "the cloned child failed");
}

static void by_posix_spawn(void)
{
	char *argv[] = { "true", NULL };
	pid_t pid;
	int err = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);

	CHECK(err == 0, "posix_spawn: %s", strerror(err));
	CHECK(hostile_wait(pid) == 0, "/bin/true failed");
}

static void by_system(void)
{
	int status;

	errno = 0;
	status = system("exit 3");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3,
	      "system(\"exit 3\") gave status %#x: %s", status, strerror(errno));
}

/* Each round, the program's large frees, then its one new task. errno
 * is what the program left in it before the call, whatever the call did
 * inside (the calls succeed). */
static int rounds(void (*make)(void))
{
	for (int i = 0; i < ROUNDS; i++) {
		hostile_recycle(BLOCK, 6, 100);
		NOTE("round %d: %d tasks before the call", i, count_entries("/proc/self/task"));
		errno = ERANGE;
		make();
		CHECK(make == by_system || errno == ERANGE, "errno %d (%s) after a successful call",
		      errno, strerror(errno));
	}
	printf("%d rounds: the new task was made each time\n", ROUNDS);
	return 0;
}

/* ---- the limits ---- */

/* The service user: a uid of its own per run, so that the tasks of
 * others (parallel cases that drop to nobody) do not come and go under
 * the limit meanwhile. */
#define SERVICE_UID_BASE 61000
#define SERVICE_UIDS 1000

static void become_service_user(void)
{
	uid_t id = SERVICE_UID_BASE + (uid_t)getpid() % SERVICE_UIDS;

	CHECK(setgroups(0, NULL) == 0 && setgid(id) == 0 && setuid(id) == 0,
	      "becoming uid %d: %s", (int)id, strerror(errno));
}

/* As the service user, RLIMIT_NPROC for its other tasks, this process's
 * main thread and one more task, in a child of this process. */
static int under_nproc(void (*make)(void))
{
	pid_t pid;

	if (geteuid() != 0)
		SKIP("RLIMIT_NPROC binds below root only: changing uid needs root");
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct rlimit rl;
		long others;

		become_service_user();
		others = tasks_of_others(getuid());
		CHECK(getrlimit(RLIMIT_NPROC, &rl) == 0, "getrlimit: %s", strerror(errno));
		rl.rlim_cur = (rlim_t)others + 2;
		CHECK(setrlimit(RLIMIT_NPROC, &rl) == 0, "setrlimit: %s", strerror(errno));
		NOTE("RLIMIT_NPROC %ld: %ld tasks of uid %d elsewhere", others + 2, others,
		     (int)getuid());
		exit(rounds(make));
	}
	return hostile_wait(pid);
}

/* In a new pids cgroup with pids.max 2: this process's main thread and
 * one more task, in a child of this process that joins it. */
static int under_pids_max(void (*make)(void))
{
	char why[256], pid_text[24];
	struct cgroup cg;
	pid_t pid;

	if (cgroup_create("pids", &cg, why, sizeof(why)) != 0)
		SKIP("%s", why);
	CHECK(cgroup_set(&cg, "pids.max", "2") == 0, "pids.max: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		snprintf(pid_text, sizeof(pid_text), "%d", (int)getpid());
		CHECK(cgroup_set(&cg, "cgroup.procs", pid_text) == 0, "joining %s: %s", cg.dir,
		      strerror(errno));
		exit(rounds(make));
	}
	return hostile_wait(pid);
}

static int nproc_fork(void) { return under_nproc(by_fork); }
static int nproc_pthread(void) { return under_nproc(by_pthread_create); }
static int nproc_clone(void) { return under_nproc(by_clone); }
static int nproc_raw_clone(void) { return under_nproc(by_raw_clone); }
static int nproc_posix_spawn(void) { return under_nproc(by_posix_spawn); }
static int nproc_system(void) { return under_nproc(by_system); }
static int pids_fork(void) { return under_pids_max(by_fork); }
static int pids_pthread(void) { return under_pids_max(by_pthread_create); }

int main(int argc, char **argv)
{
	static const struct hostile_variant list[] = {
		{ "nproc_fork", nproc_fork },
		{ "nproc_pthread", nproc_pthread },
		{ "nproc_clone", nproc_clone },
		{ "nproc_raw_clone", nproc_raw_clone },
		{ "nproc_posix_spawn", nproc_posix_spawn },
		{ "nproc_system", nproc_system },
		{ "pids_fork", pids_fork },
		{ "pids_pthread", pids_pthread },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, list);
}
