/* HUGEZERO_* options are ignored by set-user-ID and set-group-ID programs
 * (AT_SECURE): a user must not steer a privileged program's memory
 * handling, or make it write a stats file where they choose.
 *
 * As root, this program copies itself into a fresh directory, makes the
 * copy set-user-ID (or set-group-ID) to daemon, and runs it as nobody with
 * every option set to a value other than its default. The copy reports what
 * it sees (--report): AT_SECURE must be 1, every option must have its
 * default value with the source "default", and no stats file may appear
 * nor anything on stderr, although the variables are in its environment. The
 * same copy without the mode bits must see every option (so the test can
 * fail). glibc drops LD_PRELOAD paths with a slash under AT_SECURE, so the
 * copy links hugezero's core statically, as a privileged program linked with
 * libhugezero.so would run it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "options.h"
#include "report.h"

/* The privileged identity the copy takes: daemon, neither root nor the
 * caller. */
#define OWNER_ID 1

/* ---- the copy's side ---- */

static int report(void)
{
	printf("at_secure %lu\n", getauxval(AT_SECURE));
	printf("environment %s\n", getenv("HUGEZERO_THRESHOLD") ? "set" : "unset");
	for (int id = 0; id < HZ_OPT_COUNT; id++)
		printf("option %d %d %llu [%s]\n", id, (int)hz_option_source(id),
		       (unsigned long long)hz_option_u64(id), hz_option_str(id));
	fflush(stdout);
	/* What the preload does at exit. */
	hz_report_exit();
	return 0;
}

/* ---- the test's side ---- */

struct run {
	char dir[64];
	char prog[96];
	char out[96];
	char err[96];
	uid_t nobody;
	gid_t nogroup;
};

static struct run run;

/* A value of the option's type that is not its default. */
static void other_value(const struct hz_option_desc *d, uint64_t def, char *buf, size_t size)
{
	switch (d->type) {
	case HZ_OPT_SIZE:
	case HZ_OPT_INT:
		snprintf(buf, size, "%llu", (unsigned long long)(def == d->min ? d->max : d->min));
		break;
	case HZ_OPT_BOOL:
		snprintf(buf, size, "%s", def ? "0" : "1");
		break;
	case HZ_OPT_ENUM: {
		/* The first choice that is not the default. */
		size_t len = strcspn(d->choices, "|");

		if (strncmp(d->choices, d->def, len) == 0 && d->def[len] == '\0')
			snprintf(buf, size, "%s", d->choices + len + 1);
		else
			snprintf(buf, size, "%.*s", (int)len, d->choices);
		buf[strcspn(buf, "|")] = '\0';
		break;
	}
	case HZ_OPT_NAME:
		snprintf(buf, size, "rep_stosb");
		break;
	default:
		snprintf(buf, size, "%s/stats-%%p.json", run.dir);
		break;
	}
}

static uint64_t default_of(const struct hz_option_desc *d, char *text)
{
	uint64_t v = 0;

	text[0] = '\0';
	assert_int_equal(hz_option_parse(d, d->def, &v, text), 0);
	return v;
}

static void make_environment(char **env, char store[][HZ_OPTION_TEXT_MAX + 32])
{
	int n = 0;

	for (int id = 0; id < HZ_OPT_COUNT; id++) {
		const struct hz_option_desc *d = hz_option_desc(id);
		char text[HZ_OPTION_TEXT_MAX], value[HZ_OPTION_TEXT_MAX];

		other_value(d, default_of(d, text), value, sizeof(value));
		snprintf(store[n], sizeof(store[n]), "%s=%s", d->env, value);
		env[n] = store[n];
		n++;
	}
	env[n++] = "HUGEZERO_STATS=1";
	env[n++] = "PATH=/usr/bin:/bin";
	env[n] = NULL;
}

static void drop_to_nobody(void)
{
	if (setgroups(0, NULL) != 0 || setgid(run.nogroup) != 0 || setuid(run.nobody) != 0)
		_exit(120);
}

/* Stats files in the directory; removed when remove is set. */
static int stats_files(bool remove)
{
	DIR *d = opendir(run.dir);
	const struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "stats-", 6) != 0)
			continue;
		n++;
		if (remove)
			assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
	}
	closedir(d);
	return n;
}

/* Run the copy as nobody; returns its exit status. */
static int run_copy(mode_t mode)
{
	static char store[HZ_OPT_COUNT][HZ_OPTION_TEXT_MAX + 32];
	char *env[HZ_OPT_COUNT + 3];
	char *argv[] = { run.prog, "--report", NULL };
	int status, out, err;
	pid_t pid;

	stats_files(true);
	assert_int_equal(chown(run.prog, OWNER_ID, OWNER_ID), 0);
	assert_int_equal(chmod(run.prog, mode), 0);
	make_environment(env, store);
	out = open(run.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	err = open(run.err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0 && err >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out, 1);
		dup2(err, 2);
		drop_to_nobody();
		execve(run.prog, argv, env);
		_exit(127);
	}
	close(out);
	close(err);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static size_t read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return n;
}

/* Check the copy's report line by line against the defaults. */
static void check_report(const char *text, int want_secure)
{
	int seen = 0, at_secure = -1;
	const char *line = text;

	assert_non_null(strstr(text, "environment set\n"));
	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		int id, source;
		unsigned long long num;
		char str[HZ_OPTION_TEXT_MAX + 2] = "";

		sscanf(line, "at_secure %d", &at_secure);
		if (sscanf(line, "option %d %d %llu [%257[^]\n]", &id, &source, &num, str) < 3)
			continue;
		assert_true(id >= 0 && id < HZ_OPT_COUNT);
		const struct hz_option_desc *d = hz_option_desc(id);
		char def_text[HZ_OPTION_TEXT_MAX];
		uint64_t def = default_of(d, def_text);
		int is_default = source == HZ_SRC_DEFAULT && num == def &&
				 strcmp(str, def_text) == 0;

		if (want_secure && !is_default)
			fail_msg("AT_SECURE program read %s: source %d, value %llu [%s]",
				 d->env, source, num, str);
		if (!want_secure && source != HZ_SRC_ENV)
			fail_msg("ordinary program did not read %s (source %d)", d->env, source);
		seen++;
	}
	assert_int_equal(at_secure, want_secure);
	assert_int_equal(seen, HZ_OPT_COUNT);
}

static void check_privileged_run(mode_t mode)
{
	static char text[64 << 10];

	if (run.prog[0] == '\0')
		skip(); /* the reason was printed by set_up */
	assert_int_equal(run_copy(mode), 0);
	read_text(run.out, text, sizeof(text));
	check_report(text, 1);
	assert_int_equal(stats_files(false), 0);
	/* HUGEZERO_STATS=1 and VERBOSE ignored too: not a byte on stderr. */
	if (read_text(run.err, text, sizeof(text)) != 0)
		fail_msg("AT_SECURE program wrote to stderr:\n%s", text);
}

static void options_and_stats_file_ignored_when_setuid(void **state)
{
	(void)state;
	check_privileged_run(S_ISUID | 0755);
}

static void options_and_stats_file_ignored_when_setgid(void **state)
{
	(void)state;
	check_privileged_run(S_ISGID | 0755);
}

static void options_and_stats_file_honoured_without_setuid(void **state)
{
	static char text[64 << 10];

	(void)state;
	if (run.prog[0] == '\0')
		skip(); /* the reason was printed by set_up */
	assert_int_equal(run_copy(0755), 0);
	read_text(run.out, text, sizeof(text));
	check_report(text, 0);
	assert_int_equal(stats_files(false), 1);
}

static int set_up(void **state)
{
	struct statvfs fs;
	const struct passwd *pw = getpwnam("nobody");
	char cmd[256];

	(void)state;
	if (geteuid() != 0) {
		print_message("[  SKIP    ] needs root: it installs a set-user-ID copy of "
			      "itself and runs it as nobody\n");
		return 0;
	}
	run.nobody = pw ? pw->pw_uid : 65534;
	run.nogroup = pw ? pw->pw_gid : 65534;
	snprintf(run.dir, sizeof(run.dir), "/tmp/hz-secure-XXXXXX");
	if (mkdtemp(run.dir) == NULL)
		return -1;
	if (statvfs(run.dir, &fs) == 0 && (fs.f_flag & ST_NOSUID)) {
		print_message("[  SKIP    ] /tmp is mounted nosuid: the copy could not be "
			      "set-user-ID\n");
		rmdir(run.dir);
		run.dir[0] = '\0';
		return 0;
	}
	/* Sticky and world-writable, like /tmp: the copy could create its stats
	 * file here whoever it runs as. */
	chmod(run.dir, 01777);
	snprintf(run.prog, sizeof(run.prog), "%s/prog", run.dir);
	snprintf(run.out, sizeof(run.out), "%s/out", run.dir);
	snprintf(run.err, sizeof(run.err), "%s/err", run.dir);
	snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe '%s'", (int)getpid(), run.prog);
	return system(cmd) == 0 ? 0 : -1;
}

static int tear_down(void **state)
{
	char cmd[128];

	(void)state;
	if (run.dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", run.dir);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(options_and_stats_file_ignored_when_setuid),
		cmocka_unit_test(options_and_stats_file_ignored_when_setgid),
		cmocka_unit_test(options_and_stats_file_honoured_without_setuid),
	};

	if (argc > 1 && strcmp(argv[1], "--report") == 0)
		return report();
	return cmocka_run_group_tests(tests, set_up, tear_down);
}
