/* The exit report never writes where someone else points it: the stats file
 * (HUGEZERO_STATS_FILE) is created exclusively, never through a symlink,
 * private (0600) and close-on-exec, and the copy of stderr kept for the
 * report (HUGEZERO_STATS=1) is not inherited by programs the host execs.
 *
 * Each case runs twice: in this process (hugezero's core linked
 * statically, hz_report_exit called directly) and end to end, with
 * /bin/true under libhugezero-preload.so (HZ_PRELOAD) writing its report at
 * exit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "options.h"
#include "prim/prim.h"
#include "report.h"

static char dir[64];
static const char *preload;

static void path_in_dir(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void assert_text(const char *path, const char *want)
{
	char buf[256];

	read_text(path, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

/* Write the exit report here, as the preload's destructor does. */
static void report_to(const char *path)
{
	assert_int_equal(setenv("HUGEZERO_STATS_FILE", path, 1), 0);
	hz_options_reload();
	hz_report_exit();
	unsetenv("HUGEZERO_STATS_FILE");
	hz_options_reload();
}

/* Run argv with extra environment entries; its stdout goes to out, stderr
 * to err (either may be NULL). Returns the exit status. */
static int run(char *const argv[], const char *env1, const char *env2, char *out,
	       size_t out_size, char *err, size_t err_size)
{
	char out_path[96], err_path[96];
	int status;
	pid_t pid;

	path_in_dir(out_path, sizeof(out_path), ".out");
	path_in_dir(err_path, sizeof(err_path), ".err");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr))
			_exit(126);
		if ((env1 && putenv((char *)env1) != 0) || (env2 && putenv((char *)env2) != 0))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (out)
		read_text(out_path, out, out_size);
	if (err)
		read_text(err_path, err, err_size);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* /bin/true under the preload, reporting to path; returns its stderr. */
static void true_under_preload(const char *path, char *err, size_t size)
{
	static char env_preload[512], env_file[256];
	char *const argv[] = { "/bin/true", NULL };

	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	snprintf(env_file, sizeof(env_file), "HUGEZERO_STATS_FILE=%s", path);
	assert_int_equal(run(argv, env_preload, env_file, NULL, 0, err, size), 0);
}

static void symlink_at_stats_path_is_not_followed(void **state)
{
	char victim[96], link[96], dangling[96], absent[96], err[1024];
	struct stat st;

	(void)state;
	path_in_dir(victim, sizeof(victim), "victim");
	path_in_dir(link, sizeof(link), "link.json");
	path_in_dir(dangling, sizeof(dangling), "dangling.json");
	path_in_dir(absent, sizeof(absent), "absent");
	write_text(victim, "original\n");
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(symlink(absent, dangling), 0);

	report_to(link);
	report_to(dangling);
	true_under_preload(link, err, sizeof(err));
	assert_non_null(strstr(err, "exists"));
	true_under_preload(dangling, err, sizeof(err));

	assert_text(victim, "original\n");
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(lstat(absent, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void existing_stats_file_is_not_overwritten(void **state)
{
	char path[96], err[1024];

	(void)state;
	path_in_dir(path, sizeof(path), "existing.json");
	write_text(path, "someone else's\n");
	report_to(path);
	true_under_preload(path, err, sizeof(err));
	/* The likely cause is another process under the preload (a child, a
	 * wrapper such as /usr/bin/time): the warning names the cure. */
	assert_non_null(strstr(err, "exists"));
	assert_non_null(strstr(err, "put %p in HUGEZERO_STATS_FILE"));
	assert_text(path, "someone else's\n");
}

static void new_stats_file_is_private_json(void **state)
{
	char path[96], pattern[96], text[4096];
	struct stat st;
	mode_t old = umask(0); /* the mode must be 0600 on its own */

	(void)state;
	path_in_dir(path, sizeof(path), "own.json");
	report_to(path);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	read_text(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"large_requests\""));

	/* End to end: %p is the pid, and the file is the process's report. */
	path_in_dir(pattern, sizeof(pattern), "run-%p.json");
	true_under_preload(pattern, text, sizeof(text));
	assert_string_equal(text, "");
	umask(old);
	snprintf(text, sizeof(text), "ls %s/run-*.json >/dev/null", dir);
	assert_int_equal(system(text), 0);
}

/* Is fd open in a program this process execs? */
static int open_after_exec(int fd)
{
	char script[64];
	char *const argv[] = { "/bin/sh", "-c", script, NULL };

	snprintf(script, sizeof(script), "test -e /proc/self/fd/%d", fd);
	return run(argv, NULL, NULL, NULL, 0, NULL, 0) == 0;
}

static void stats_file_is_close_on_exec(void **state)
{
	char path[96];
	int fd, plain;

	(void)state;
	path_in_dir(path, sizeof(path), "cloexec.json");
	fd = hz_prim_create_file(path);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_false(open_after_exec(fd));
	/* The probe sees an inherited descriptor: the check can fail. */
	plain = dup(fd);
	assert_true(plain >= 0);
	assert_true(open_after_exec(plain));
	close(plain);
	/* Exclusive: a second create of the same path fails. */
	assert_int_equal(hz_prim_create_file(path), -EEXIST);
	hz_prim_close(fd);
}

/* A shell prints "fd target" for each of its descriptors; started under
 * the preload with HUGEZERO_STATS=1, directly or by cmd (which execs it
 * with LD_PRELOAD removed). */
#define LIST_FDS "cd /proc/$$/fd && for f in *; do echo \"$f $(readlink $f)\"; done"

static void shell_fds(const char *cmd, char *out, size_t size)
{
	static char env_preload[512];
	char *const argv[] = { (char *)cmd, "-u", "LD_PRELOAD", "/bin/sh", "-c", LIST_FDS, NULL };
	char *const direct[] = { "/bin/sh", "-c", LIST_FDS, NULL };

	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	assert_int_equal(run(cmd ? argv : direct, env_preload, "HUGEZERO_STATS=1", out, size,
			     NULL, 0), 0);
}

/* Descriptors other than 2 open on the same file as 2 (the test's runner
 * may pass others down, so only copies of stderr count). */
static int stderr_copies(const char *list)
{
	char target[256] = "";
	const char *line;
	int copies = 0;

	for (line = list; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (sscanf(line, "2 %255s", target) == 1)
			break;
	assert_true(target[0] != '\0');
	for (line = list; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		char t[256];
		int fd;

		if (sscanf(line, "%d %255s", &fd, t) == 2 && fd >= 100 && strcmp(t, target) == 0)
			copies++;
	}
	return copies;
}

static void stderr_copy_is_not_inherited_across_exec(void **state)
{
	char fds[4096];

	(void)state;
	/* A shell under the preload holds the copy (fd 100 or above)... */
	shell_fds(NULL, fds, sizeof(fds));
	if (stderr_copies(fds) != 1)
		fail_msg("no copy of stderr at fd >= 100 under HUGEZERO_STATS=1:\n%s", fds);
	/* ...and env, under the preload with the copy, execs a shell without
	 * it: the shell must not have it. */
	shell_fds("/usr/bin/env", fds, sizeof(fds));
	if (stderr_copies(fds) != 0)
		fail_msg("the stats copy of stderr leaked across exec:\n%s", fds);
}

/* A program that closes every descriptor above stderr and opens its own
 * file at the number of the kept copy (closefrom, then a daemon's log at
 * 100): the report at exit goes to stderr, not into the program's file. */
static void program_file_at_the_copys_number_gets_no_report(void **state)
{
	static char env_preload[512], env_file[256];
	char *const argv[] = { "/bin/bash", "-c",
			       "exec 100>&-; exec 100>\"$HZ_TEST_FILE\"; echo program >&100", NULL };
	char path[96], err[8192];

	(void)state;
	path_in_dir(path, sizeof(path), "program.log");
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	snprintf(env_file, sizeof(env_file), "HZ_TEST_FILE=%s", path);
	assert_int_equal(setenv("HUGEZERO_STATS", "1", 1), 0);
	assert_int_equal(run(argv, env_preload, env_file, NULL, 0, err, sizeof(err)), 0);
	unsetenv("HUGEZERO_STATS");
	assert_text(path, "program\n");
	if (strstr(err, "hugezero: stats for pid") == NULL)
		fail_msg("the report did not reach stderr:\n%s", err);
	unlink(path);
}

static int set_up(void **state)
{
	(void)state;
	preload = getenv("HZ_PRELOAD");
	if (preload == NULL) {
		fprintf(stderr, "HZ_PRELOAD must name libhugezero-preload.so\n");
		return -1;
	}
	snprintf(dir, sizeof(dir), "/tmp/hz-stats-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int tear_down(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(symlink_at_stats_path_is_not_followed),
		cmocka_unit_test(existing_stats_file_is_not_overwritten),
		cmocka_unit_test(new_stats_file_is_private_json),
		cmocka_unit_test(stats_file_is_close_on_exec),
		cmocka_unit_test(stderr_copy_is_not_inherited_across_exec),
		cmocka_unit_test(program_file_at_the_copys_number_gets_no_report),
	};

	return cmocka_run_group_tests(tests, set_up, tear_down);
}
