/* See harness.h. */
#include "harness.h"
#include "../util.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* 60 s: the slowest scenario takes about 1 s; a hung child must not hold
 * the test until meson's timeout. */
#define SCENARIO_ALARM_S 60

/* ---- inside a scenario ---- */

int res_scenario_main(int argc, char **argv, const struct scenario *list)
{
	if (argc != 3 || strcmp(argv[1], "--scenario") != 0)
		return -1;
	alarm(SCENARIO_ALARM_S);
	hz_test_have_a_thread();
	for (; list->name; list++)
		if (strcmp(list->name, argv[2]) == 0)
			return list->run();
	fprintf(stderr, "no scenario named %s\n", argv[2]);
	return 2;
}

size_t res_resident(const void *p, size_t len)
{
	/* Static: it must work where no new mapping can be made. */
	static unsigned char vec[4096];
	size_t bytes = 0;

	for (size_t off = 0; off < len; off += sizeof(vec) * 4096) {
		size_t n = len - off < sizeof(vec) * 4096 ? len - off : sizeof(vec) * 4096;

		if (mincore((char *)p + off, n, vec) != 0) {
			fprintf(stderr, "mincore failed: %s\n", strerror(errno));
			exit(1);
		}
		for (size_t i = 0; i < (n + 4095) / 4096; i++)
			bytes += (vec[i] & 1) * 4096;
	}
	return bytes;
}

uint64_t res_page_size(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], perms[8];
	unsigned long a, b;
	uint64_t kb = 0;
	bool in = false;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3)
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
		else if (in && strncmp(line, "KernelPageSize:", 15) == 0)
			kb = strtoull(line + 15, NULL, 10);
	}
	fclose(f);
	return kb * KiB;
}

int res_mapping_at(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, char perms[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long a, b;
	int ret = -1;

	if (!f)
		return -1;
	while (ret != 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s", &a, &b, perms) == 3 && addr >= a && addr < b) {
			*lo = a;
			*hi = b;
			ret = 0;
		}
	fclose(f);
	return ret;
}

long res_map_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	long n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strchr(line, '\n') && !strstr(line, "[vsyscall]"))
			n++;
	fclose(f);
	return n;
}

uint64_t res_address_space(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long pages = 0;

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---- children ---- */

void res_require_preload(void)
{
	const char *p = getenv("LD_PRELOAD");

	if (p == NULL || strstr(p, "libhugezero-preload") == NULL)
		fail_msg("run this test under libhugezero-preload.so (LD_PRELOAD)");
}

/* The whole file, NUL-terminated, or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t len = 0, cap = 4096, n;
	char *buf;

	if (!f)
		return NULL;
	buf = malloc(cap);
	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		char *bigger;

		len += n;
		if (len + 1 < cap)
			continue;
		bigger = realloc(buf, cap *= 2);
		if (bigger == NULL)
			free(buf);
		buf = bigger;
	}
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

static void exec_scenario(const char *name, void (*setup)(void), const char *const *env,
			  const char *dir)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/stderr", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || dup2(fd, 2) < 0)
		_exit(125);
	snprintf(path, sizeof(path), "%s/%%p.json", dir);
	setenv("HUGEZERO_STATS_FILE", path, 1);
	for (; env && *env; env++)
		putenv((char *)*env);
	if (setup)
		setup();
	execl("/proc/self/exe", program_invocation_name, "--scenario", name, (char *)NULL);
	fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
	_exit(126);
}

void res_spawn(const char *name, void (*setup)(void), const char *const *env,
	       struct child *c)
{
	char dir[] = "/tmp/hz-resources-XXXXXX", path[128];

	memset(c, 0, sizeof(*c));
	assert_non_null(mkdtemp(dir));
	fflush(NULL);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0)
		exec_scenario(name, setup, env, dir);
	assert_int_equal(waitpid(c->pid, &c->status, 0), c->pid);
	snprintf(path, sizeof(path), "%s/stderr", dir);
	c->err = slurp(path);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%d.json", dir, (int)c->pid);
	c->stats = slurp(path);
	unlink(path);
	rmdir(dir);
	if (c->err == NULL)
		c->err = strdup("");
}

void res_expect_success(const struct child *c)
{
	if (WIFSIGNALED(c->status))
		fail_msg("scenario killed by signal %d (%s); its stderr:\n%s",
			 WTERMSIG(c->status), strsignal(WTERMSIG(c->status)), c->err);
	if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0)
		fail_msg("scenario exited with %d; its stderr:\n%s",
			 WEXITSTATUS(c->status), c->err);
}

uint64_t res_stat(const struct child *c, const char *path)
{
	char key[64], quoted[72];
	const char *at;

	if (c->stats == NULL)
		fail_msg("no JSON stats from the scenario; its stderr:\n%s", c->err);
	at = c->stats;
	/* Each part of the path is searched for after the previous one:
	 * "blocks.thp.count" is the count inside "thp" inside "blocks". */
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ".");

		snprintf(key, sizeof(key), "%.*s", (int)n, p);
		snprintf(quoted, sizeof(quoted), "\"%s\"", key);
		at = strstr(at, quoted);
		if (at == NULL)
			fail_msg("stats have no %s:\n%s", path, c->stats);
		at += strlen(quoted);
		p += n + (p[n] == '.');
	}
	while (*at == ':' || *at == ' ')
		at++;
	if (*at < '0' || *at > '9')
		fail_msg("stats: %s is not a number:\n%s", path, c->stats);
	return strtoull(at, NULL, 10);
}

void res_child_free(struct child *c)
{
	free(c->err);
	free(c->stats);
	c->err = c->stats = NULL;
}

/* ---- system settings ---- */

long res_read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int res_write_long(const char *path, long value)
{
	char text[32];
	int fd = open(path, O_WRONLY | O_CLOEXEC), n;
	ssize_t w;

	if (fd < 0)
		return -1;
	n = snprintf(text, sizeof(text), "%ld\n", value);
	w = write(fd, text, (size_t)n);
	return close(fd) == 0 && w == n ? 0 : -1;
}

/* What to put back: prepared in advance, so that the signal handler only
 * calls open, write and close (async-signal-safe). */
struct saved {
	char path[96];
	char text[32];
	size_t len;
};

#define MAX_SAVED 4
static struct saved saved[MAX_SAVED];
static volatile sig_atomic_t saved_count;

void res_sysctl_restore(void)
{
	for (int i = saved_count - 1; i >= 0; i--) {
		int fd = open(saved[i].path, O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, saved[i].text, saved[i].len) != (ssize_t)saved[i].len) {
			static const char msg[] = "resources: could not restore a sysctl\n";

			if (write(2, msg, sizeof(msg) - 1) < 0) {
				/* nothing more to do */
			}
		}
		if (fd >= 0)
			close(fd);
	}
	saved_count = 0;
}

static void restore_and_die(int sig)
{
	res_sysctl_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_restorers(void)
{
	static bool done;
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM };

	if (done)
		return;
	done = true;
	atexit(res_sysctl_restore);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], restore_and_die);
}

int res_sysctl_set(const char *path, long value)
{
	long old = res_read_long(path);
	bool known = false;

	if (old < 0)
		return -1;
	install_restorers();
	for (int i = 0; i < saved_count; i++)
		known |= strcmp(saved[i].path, path) == 0;
	if (!known) {
		struct saved *s;

		if (saved_count == MAX_SAVED)
			return -1;
		s = &saved[saved_count];
		snprintf(s->path, sizeof(s->path), "%s", path);
		s->len = (size_t)snprintf(s->text, sizeof(s->text), "%ld\n", old);
		saved_count++;
	}
	return res_write_long(path, value);
}
