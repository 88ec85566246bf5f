/* A real program under libhugezero-preload.so never has a mapping that is
 * writable and executable at once, whatever HUGEZERO_EXEC does to its text:
 * numpy in /usr/bin/python3 runs while this process reads
 * /proc/PID/maps as fast as it can (a few thousand samples over start-up,
 * where the text is remapped, and the run), and the program checks its own
 * maps at the end. exec/exec_text.c checks the same on a generated library
 * from inside; this is the whole of a real program, from outside. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#define PYTHON "/usr/bin/python3"

/* Imports numpy (dlopen of its libraries: advised or remapped), works
 * with large arrays (hugezero's blocks), then prints its own W+X mappings. */
static const char script[] =
	"import numpy as np, re\n"
	"a = np.random.rand(600, 600)\n"
	"b = (a @ a).sum() + np.zeros(4 << 20).sum()\n"
	"wx = [l for l in open('/proc/self/maps') if re.match(r'\\S+ .wx', l)]\n"
	"print('end-of-run W+X mappings:', len(wx))\n"
	"print(''.join(wx), end='')\n";

static const char *preload;
static bool numpy;

static bool have_numpy(void)
{
	return system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
}

struct watch {
	long samples;
	long wx_samples;
	char wx_line[512];
	char out[8192];
	char err[8192];
	int status;
};

static void read_all(int fd, char *buf, size_t size)
{
	size_t used = 0;
	ssize_t n;

	while (used + 1 < size && (n = read(fd, buf + used, size - 1 - used)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
}

/* One look at pid's maps: the first W+X line into w, if any. Returns -1
 * once the process is gone. */
static int sample(pid_t pid, struct watch *w)
{
	static char buf[1 << 20];
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	read_all(fd, buf, sizeof(buf));
	close(fd);
	w->samples++;
	for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		char perms[8];

		if (sscanf(line, "%*x-%*x %7s", perms) == 1 && perms[1] == 'w' && perms[2] == 'x') {
			w->wx_samples++;
			snprintf(w->wx_line, sizeof(w->wx_line), "%.*s",
				 (int)strcspn(line, "\n"), line);
			break;
		}
	}
	return 0;
}

/* Start argv (with env added), sample its maps until it exits. */
static void watch(char *const argv[], char *const env[], struct watch *w)
{
	int out[2], err[2];
	pid_t pid;

	memset(w, 0, sizeof(*w));
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (int i = 0; env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	/* The pipes are small: a program that fills one would stall, so the
	 * outputs stay small (the script prints a few lines). Reading maps
	 * takes the process's mmap lock: back to back through start-up,
	 * where the text is remapped, then every millisecond, which costs
	 * the program little. */
	while (waitpid(pid, &w->status, WNOHANG) == 0) {
		const struct timespec pause = { 0, 1000000 };

		sample(pid, w);
		if (w->samples > 2000)
			nanosleep(&pause, NULL);
	}
	read_all(out[0], w->out, sizeof(w->out));
	read_all(err[0], w->err, sizeof(w->err));
	close(out[0]);
	close(err[0]);
}

static void check_numpy(const char *mode)
{
	static char env_preload[512], env_mode[64];
	char *const argv[] = { PYTHON, "-c", (char *)script, NULL };
	char *const env[] = { env_preload, env_mode, "HUGEZERO_STATS=1", NULL };
	struct watch w;
	const char *remapped;

	if (!numpy) {
		print_message("[  SKIP    ] " PYTHON " has no numpy (python3-numpy)\n");
		skip();
	}
	snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload);
	snprintf(env_mode, sizeof(env_mode), "HUGEZERO_EXEC=%s", mode);
	watch(argv, env, &w);
	print_message("HUGEZERO_EXEC=%s: %ld samples of /proc/PID/maps\n", mode, w.samples);
	if (!WIFEXITED(w.status) || WEXITSTATUS(w.status) != 0)
		fail_msg("python failed (status %#x):\n%s", w.status, w.err);
	if (w.wx_samples)
		fail_msg("%ld samples saw a writable and executable mapping: %s",
			 w.wx_samples, w.wx_line);
	if (!strstr(w.out, "end-of-run W+X mappings: 0\n"))
		fail_msg("at the end of the run:\n%s", w.out);
	assert_true(w.samples >= 10);
	/* hugezero was there and did what the mode says. */
	if (!strstr(w.err, "hugezero:   large requests") || strstr(w.err, "requests  0 served"))
		fail_msg("hugezero served no large request:\n%s", w.err);
	remapped = strstr(w.err, "remapped ");
	assert_non_null(remapped);
	if (strcmp(mode, "remap") == 0 && strtod(remapped + 9, NULL) <= 0)
		fail_msg("HUGEZERO_EXEC=remap moved no text:\n%s", w.err);
}

static void numpy_with_exec_advise_never_maps_write_and_execute(void **state)
{
	(void)state;
	check_numpy("advise");
}

static void numpy_with_exec_remap_never_maps_write_and_execute(void **state)
{
	(void)state;
	check_numpy("remap");
}

/* The sampler sees a W+X mapping when there is one: the check can fail. */
static void sampler_sees_a_write_execute_mapping(void **state)
{
	struct watch w;
	pid_t pid;

	(void)state;
	memset(&w, 0, sizeof(w));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const struct timespec pause = { 0, 200000000 };

		if (mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			_exit(1);
		nanosleep(&pause, NULL);
		_exit(0);
	}
	while (waitpid(pid, &w.status, WNOHANG) == 0)
		sample(pid, &w);
	assert_true(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0);
	assert_true(w.wx_samples > 0);
}

static int set_up(void **state)
{
	(void)state;
	preload = getenv("HZ_PRELOAD");
	if (preload == NULL) {
		fprintf(stderr, "HZ_PRELOAD must name libhugezero-preload.so\n");
		return -1;
	}
	return 0;
}


int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sampler_sees_a_write_execute_mapping),
		cmocka_unit_test(numpy_with_exec_advise_never_maps_write_and_execute),
		cmocka_unit_test(numpy_with_exec_remap_never_maps_write_and_execute),
	};

	numpy = have_numpy();
	return cmocka_run_group_tests(tests, set_up, NULL);
}
