/* See hostile.h. */
#include "hostile.h"

#include <time.h>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int hostile_main(int argc, char **argv, const struct hostile_variant *list)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s VARIANT\n", argv[0]);
		return 2;
	}
	for (; list->name; list++)
		if (strcmp(list->name, argv[1]) == 0)
			return list->run();
	fprintf(stderr, "no variant named %s\n", argv[1]);
	return 2;
}

void hostile_use_new_block(size_t len, bool zeroed)
{
	char *p = zeroed ? calloc(1, len) : malloc(len);
	size_t off;

	CHECK(p != NULL, "%s(%zu) failed: %s", zeroed ? "calloc" : "malloc", len, strerror(errno));
	if (zeroed) {
		off = hz_test_first_nonzero(p, len);
		CHECK(off == len, "calloc(%zu) has byte %#x at offset %zu", len,
		      (unsigned char)p[off], off);
	}
	hz_test_fill(p, len, 77);
	off = hz_test_check(p, len, 77);
	CHECK(off == len, "the new block does not keep its bytes at offset %zu", off);
	free(p);
}

void hostile_recycle(size_t len, int times, unsigned settle_ms)
{
	struct timespec settle = { settle_ms / 1000, (long)(settle_ms % 1000) * 1000000L };

	for (int i = 0; i < times; i++) {
		char *p = calloc(1, len);

		CHECK(p != NULL, "calloc(%zu): %s", len, strerror(errno));
		memset(hostile_keep(p), 1 + i, len);
		free(p);
	}
	if (settle_ms > 0)
		nanosleep(&settle, NULL);
}

/* Calls fn(field line) for each line of the smaps entries overlapping
 * [lo, hi). */
static void smaps_each(uintptr_t lo, uintptr_t hi, void (*fn)(const char *, void *), void *arg)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[1024], perms[8];
	unsigned long a, b;
	bool in = false;

	CHECK(f != NULL, "cannot read /proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		/* Only a mapping's first line starts "lo-hi perms". */
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3)
			in = a < hi && b > lo;
		else if (in)
			fn(line, arg);
	}
	fclose(f);
}

struct flag_query {
	const char *flag;
	bool found;
};

static void find_flag(const char *line, void *arg)
{
	struct flag_query *q = arg;
	const char *at = line + 8;

	if (strncmp(line, "VmFlags:", 8) != 0)
		return;
	while ((at = strstr(at, q->flag)) != NULL) {
		if (at[-1] == ' ' && (at[2] == ' ' || at[2] == '\n'))
			q->found = true;
		at += 2;
	}
}

bool hostile_vmflag(const void *p, size_t len, const char *flag)
{
	struct flag_query q = { flag, false };

	smaps_each((uintptr_t)p, (uintptr_t)p + len, find_flag, &q);
	return q.found;
}

struct sum_query {
	const char *field;
	uint64_t kb;
};

static void add_field(const char *line, void *arg)
{
	struct sum_query *q = arg;
	size_t n = strlen(q->field);

	if (strncmp(line, q->field, n) == 0)
		q->kb += strtoull(line + n, NULL, 10);
}

uint64_t hostile_smaps_sum(const void *p, size_t len, const char *field)
{
	struct sum_query q = { field, 0 };

	smaps_each((uintptr_t)p, (uintptr_t)p + len, add_field, &q);
	return q.kb * KiB;
}

long long hostile_status_bytes(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(name);
	long long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0)
			v = strtoll(line + n, NULL, 10) * 1024;
	fclose(f);
	return v;
}

long long hostile_baseline(const char *name)
{
	char var[96];
	const char *v;

	snprintf(var, sizeof(var), "HOSTILE_BASELINE_%s", name);
	v = getenv(var);
	return v ? strtoll(v, NULL, 10) : -1;
}

void hostile_print_baseline(const char *name, long long value)
{
	printf("baseline %s %lld\n", name, value);
}

int hostile_wait(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	if (WIFSIGNALED(status)) {
		printf("child killed by signal %d (%s)\n", WTERMSIG(status),
		       strsignal(WTERMSIG(status)));
		return 1;
	}
	return WEXITSTATUS(status);
}

void hostile_drop_root(void)
{
	uid_t uid = 65534;
	gid_t gid = 65534;
	const struct passwd *pw;

	if (geteuid() != 0)
		return;
	pw = getpwnam("nobody");
	if (pw) {
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	}
	CHECK(setgroups(0, NULL) == 0 && setgid(gid) == 0 && setuid(uid) == 0,
	      "becoming nobody: %s", strerror(errno));
}

int hostile_temp_file(size_t len, unsigned char byte)
{
	char path[] = "/tmp/hz-hostile-XXXXXX";
	static char buf[64 * 1024];
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	memset(buf, byte, sizeof(buf));
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		CHECK(write(fd, buf, n) == (ssize_t)n, "write: %s", strerror(errno));
		done += n;
	}
	return fd;
}

long long hostile_read_ll(const char *path)
{
	FILE *f = fopen(path, "r");
	long long v = -1;

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int hostile_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = (ssize_t)strlen(text), w;

	if (fd < 0)
		return -1;
	w = write(fd, text, (size_t)n);
	return close(fd) == 0 && w == n ? 0 : -1;
}

void hostile_skip_if_hugetlb_pool(void)
{
	const char *dir = "/sys/kernel/mm/hugepages/hugepages-2048kB";
	char path[96];
	long long free_pages, resv;

	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	free_pages = hostile_read_ll(path);
	snprintf(path, sizeof(path), "%s/resv_hugepages", dir);
	resv = hostile_read_ll(path);
	/* The glibc run records what it found: when it found no free pages
	 * and the second run does, another process raised the pool between
	 * the runs (other test suites do). */
	if (free_pages > 0 && free_pages > resv && hostile_baseline("hugetlb_free") == 0)
		SKIP("environment changed: the 2 MiB hugetlb pool got %lld free pages "
		     "between the runs", free_pages - resv);
	if (free_pages > 0 && free_pages > resv)
		SKIP("the 2 MiB hugetlb pool has %lld free pages (vm.nr_hugepages), where "
		     "blocks may be hugetlb memory: the hugetlb_pool_* cases cover that",
		     free_pages - resv);
	hostile_print_baseline("hugetlb_free", 0);
}

/* ---- undo: prepared in advance, so the signal handler only calls open,
 * write, close and rmdir (async-signal-safe) ---- */

struct undo {
	char path[192];
	char text[64];
	bool rmdir;
};

#define MAX_UNDO 8
static struct undo undo[MAX_UNDO];
static volatile sig_atomic_t undo_count;
static pid_t undo_owner;

void hostile_undo_all(void)
{
	if (getpid() != undo_owner)
		return;
	for (int i = undo_count - 1; i >= 0; i--) {
		const struct undo *u = &undo[i];
		int ok = -1;

		/* An emptied cgroup can be busy for a moment. */
		for (int tries = 0; u->rmdir && ok != 0 && tries < 50; tries++) {
			ok = rmdir(u->path);
			if (ok != 0 && errno == ENOENT)
				ok = 0;
			if (ok != 0)
				usleep(20000);
		}
		if (!u->rmdir) {
			int fd = open(u->path, O_WRONLY | O_CLOEXEC);
			ssize_t n = (ssize_t)strlen(u->text);

			ok = fd >= 0 && write(fd, u->text, (size_t)n) == n ? 0 : -1;
			if (fd >= 0)
				close(fd);
		}
		if (ok != 0) {
			static const char msg[] = "hostile: could not undo a system change: ";

			if (write(2, msg, sizeof(msg) - 1) < 0 ||
			    write(2, u->path, strlen(u->path)) < 0 || write(2, "\n", 1) < 0) {
				/* nothing more to do */
			}
		}
	}
	undo_count = 0;
}

static void undo_and_die(int sig)
{
	hostile_undo_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void add_undo(const char *path, const char *text)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM };
	struct undo *u;

	CHECK(undo_count < MAX_UNDO, "too many system changes to undo");
	if (undo_owner == 0) {
		undo_owner = getpid();
		atexit(hostile_undo_all);
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], undo_and_die);
	}
	u = &undo[undo_count];
	snprintf(u->path, sizeof(u->path), "%s", path);
	snprintf(u->text, sizeof(u->text), "%s", text ? text : "");
	u->rmdir = text == NULL;
	undo_count++;
}

void hostile_undo_write(const char *path, const char *text)
{
	add_undo(path, text);
}

void hostile_undo_rmdir(const char *path)
{
	add_undo(path, NULL);
}
