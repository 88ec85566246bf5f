/* exec with the preload still set, from a multithreaded process whose
 * pre-zero thread is busy: a forked child allocates, frees a dirty block
 * (its own pre-zero thread starts) and execs; posix_spawn execs without
 * running fork handlers. The new image must start the preload again, run
 * its allocations correctly and exit 0; under the preload, its JSON stats
 * (HUGEZERO_STATS_FILE, written at exit by the image with the child's pid)
 * prove hugezero served it. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "stress.h"

#define CHILD_SECONDS 20

extern char **environ;

static char workdir[] = "/tmp/hz-stress-exec-XXXXXX";
static char stats_var[128];
static char **child_env;

/* environ with HUGEZERO_STATS_FILE pointing into workdir; built before any
 * fork, so the child only execs. */
static char **environment(void)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	assert_non_null(env);
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HUGEZERO_STATS_FILE=", 20) != 0)
			env[k++] = environ[i];
	snprintf(stats_var, sizeof(stats_var), "HUGEZERO_STATS_FILE=%s/stats.%%p.json", workdir);
	env[k++] = stats_var;
	env[k] = NULL;
	return env;
}

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(workdir) == NULL)
		return -1;
	child_env = environment();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(child_env);
	return rmdir(workdir);
}

static const char *helper(void)
{
	const char *h = getenv("HZ_STRESS_HELPER");

	if (h == NULL)
		fail_msg("HZ_STRESS_HELPER (the path of stress_helper) is not set");
	return h;
}

/* Read the stats file of pid, then remove it. Under the preload it must
 * exist, carry pid, and count large requests when want_large. Without the
 * preload nothing may have written it. */
static int check_stats(pid_t pid, bool want_large, const char *what)
{
	char path[256], buf[8192], pid_field[48];
	unsigned long long large = 0;
	const char *field;
	size_t len = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stats.%d.json", workdir, (int)pid);
	f = fopen(path, "r");
	if (!stress_preloaded()) {
		if (f == NULL)
			return 0;
		fclose(f);
		fprintf(stderr, "%s: %s written without the preload\n", what, path);
		return -1;
	}
	if (f == NULL) {
		fprintf(stderr, "%s: no %s: the new image did not report (%s)\n", what, path,
			strerror(errno));
		return -1;
	}
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	unlink(path);
	buf[len] = '\0';
	snprintf(pid_field, sizeof(pid_field), "\"pid\": %d,", (int)pid);
	field = strstr(buf, "\"large_requests\": ");
	if (strstr(buf, pid_field) == NULL || field == NULL ||
	    sscanf(field, "\"large_requests\": %llu", &large) != 1) {
		fprintf(stderr, "%s: %s is not the report of pid %d:\n%s\n", what, path,
			(int)pid, buf);
		return -1;
	}
	if (want_large && large == 0) {
		fprintf(stderr, "%s: hugezero served no large request of pid %d\n", what,
			(int)pid);
		return -1;
	}
	return 0;
}

/* In the child: the common checks, a dirty block freed (this process's
 * pre-zero thread starts on it), then exec. */
static void child(unsigned slot, const char *path, char *const argv[])
{
	size_t big = 16 * stress_threshold();
	unsigned char *p;
	int rc = stress_child_work(slot);

	if (rc != 0)
		_exit(rc);
	p = malloc(big);
	if (p)
		stress_stamp(p, big, slot);
	stress_escape(p);
	free(p);
	stress_child_step(slot, "execve");
	execve(path, argv, child_env);
	_exit(127);
}

static void exec_from_forked_child_with_preload_set(void **state)
{
	unsigned execs = (unsigned)stress_env("HZ_EXECS", 40), bad = 0;
	const char *h = helper();

	(void)state;
	fflush(NULL);
	stress_load_start(2, NULL, 0);
	for (unsigned i = 0; i < execs && bad < 5; i++) {
		/* Every fourth runs /bin/true: a program that allocates
		 * nothing large still starts and reports. */
		bool helper_run = i % 4 != 3;
		const char *path = helper_run ? h : "/bin/true";
		char *const argv[] = { (char *)path, NULL };
		unsigned slot = stress_child_slot();
		pid_t pid;

		stress_phase(CHILD_SECONDS + 20, "exec from a child: child %u of %u execs %s",
			     i + 1, execs, path);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			child(slot, path, argv);
		stress_child_track(pid, slot);
		if (stress_child_reap(pid, slot, CHILD_SECONDS, "exec from a child") != 0 ||
		    check_stats(pid, helper_run, "exec from a child") != 0)
			bad++;
	}
	stress_phase(60, "exec from a child: stopping the allocating threads");
	assert_int_equal(stress_load_stop(), 0);
	stress_phase_end();
	assert_int_equal(bad, 0);
}

static void posix_spawn_with_preload_set(void **state)
{
	unsigned spawns = (unsigned)stress_env("HZ_SPAWNS", 20), bad = 0;
	char *const argv[] = { (char *)helper(), NULL };

	(void)state;
	stress_load_start(2, NULL, 0);
	for (unsigned i = 0; i < spawns && bad < 5; i++) {
		unsigned slot = stress_child_slot();
		int err;
		pid_t pid;

		stress_phase(CHILD_SECONDS + 20, "posix_spawn %u of %u", i + 1, spawns);
		err = posix_spawn(&pid, argv[0], NULL, NULL, argv, child_env);
		if (err != 0)
			fail_msg("posix_spawn %s: %s", argv[0], strerror(err));
		stress_child_track(pid, slot);
		stress_child_step(slot, "spawned helper");
		if (stress_child_reap(pid, slot, CHILD_SECONDS, "posix_spawn") != 0 ||
		    check_stats(pid, true, "posix_spawn") != 0)
			bad++;
	}
	stress_phase(60, "posix_spawn: stopping the allocating threads");
	assert_int_equal(stress_load_stop(), 0);
	stress_phase_end();
	assert_int_equal(bad, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(exec_from_forked_child_with_preload_set),
		cmocka_unit_test(posix_spawn_with_preload_set),
	};

	return stress_main(all, sizeof(all) / sizeof(all[0]), setup, teardown, argc, argv);
}
