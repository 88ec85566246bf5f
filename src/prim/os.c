/* The system's facts and every /proc, /sys and /tmp path of the library.
 * See os.h for what is read once and what is read when asked. */
#define HZ_OS_TESTING /* hz_os_reload is defined here */
#include "os.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "prim.h"
#include "../sizes.h"

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define HUGETLB_DIR "/sys/kernel/mm/hugepages"

/* ---- THP ---- */

static enum hz_thp_mode read_thp_mode(void)
{
	char buf[128];

	if (hz_prim_read_file(THP_DIR "/enabled", buf, sizeof(buf)) <= 0)
		return HZ_THP_UNREADABLE;
	if (strstr(buf, "[never]"))
		return HZ_THP_NEVER;
	if (strstr(buf, "[always]"))
		return HZ_THP_ALWAYS;
	/* "[madvise]", or text naming none of the three (no kernel prints
	 * that): anything but "never" has always counted as on. */
	return HZ_THP_MADVISE;
}

/* Anonymous mTHP starts at order 2 (16 KiB with 4 KiB pages) on every
 * architecture; the PMD size is the largest. */
static void read_thp(size_t page_size, size_t pmd_size, struct hz_os_thp *t)
{
	char path[96], buf[96];
	bool on;

	t->mode = read_thp_mode();
	t->sizes = 0;
	t->per_size = false;
	on = hz_os_thp_on(t->mode);
	for (size_t bytes = page_size * 4; bytes != 0 && bytes <= pmd_size; bytes *= 2) {
		snprintf(path, sizeof(path), THP_DIR "/hugepages-%zukB/enabled", bytes >> 10);
		if (hz_prim_read_file(path, buf, sizeof(buf)) <= 0) {
			if (bytes == pmd_size && on) /* before mTHP (6.8): PMD only */
				t->sizes |= bytes;
			continue;
		}
		t->per_size = true;
		if (strstr(buf, "[always]") || strstr(buf, "[madvise]") ||
		    (strstr(buf, "[inherit]") && on))
			t->sizes |= bytes;
	}
}

void hz_os_read_thp(struct hz_os_thp *out)
{
	const struct hz_os *os = hz_os();
	int saved = errno;

	read_thp(os->page_size, os->pmd_size, out);
	errno = saved;
}

/* ---- hugetlb pools ---- */

static const struct {
	const char *dir;
	size_t page_size;
} pool_dirs[HZ_OS_POOLS] = {
	[HZ_OS_POOL_1G] = { HUGETLB_DIR "/hugepages-1048576kB", HZ_SZ_1G },
	[HZ_OS_POOL_2M] = { HUGETLB_DIR "/hugepages-2048kB", HZ_SZ_2M },
};

static void read_pools(struct hz_os_pool_info *pools)
{
	for (unsigned i = 0; i < HZ_OS_POOLS; i++) {
		char path[96];
		uint64_t pages;

		pools[i].dir = pool_dirs[i].dir;
		pools[i].page_size = pool_dirs[i].page_size;
		snprintf(path, sizeof(path), "%s/nr_hugepages", pool_dirs[i].dir);
		pools[i].present = hz_prim_read_u64(path, &pages) == 0;
	}
}

uint64_t hz_os_pool_available(enum hz_os_pool pool)
{
	const struct hz_os_pool_info *p;
	uint64_t free_pages = 0, reserved = 0;
	char path[96];

	if ((unsigned)pool >= HZ_OS_POOLS)
		return 0;
	p = &hz_os()->pools[pool];
	if (!p->present)
		return 0;
	snprintf(path, sizeof(path), "%s/free_hugepages", p->dir);
	if (hz_prim_read_u64(path, &free_pages) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/resv_hugepages", p->dir);
	if (hz_prim_read_u64(path, &reserved) != 0)
		reserved = 0;
	return free_pages > reserved ? free_pages - reserved : 0;
}

/* ---- caches ---- */

static uint64_t read_llc_size(void)
{
	char path[64], buf[32], *end;
	unsigned long long size = 0;

	/* index0..3 are L1d, L1i, L2, L3 on x86 and most arm64 */
	for (int index = 3; index >= 2 && size == 0; index--) {
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size",
			 index);
		if (hz_prim_read_file(path, buf, sizeof(buf)) <= 0)
			continue;
		size = strtoull(buf, &end, 10);
		if (*end == 'K')
			size <<= 10;
		else if (*end == 'M')
			size <<= 20;
	}
	return size;
}

uint64_t hz_prim_llc_size(void)
{
	return hz_os()->llc_size;
}

/* ---- the struct ---- */

int hz_os_overcommit_mode(uint64_t *mode)
{
	return hz_prim_read_u64("/proc/sys/vm/overcommit_memory", mode);
}

static bool read_overcommits(void)
{
	uint64_t mode;

	return hz_os_overcommit_mode(&mode) == 0 && mode < 2;
}

static void fill(struct hz_os *os)
{
	os->page_size = hz_prim_page_size();
	/* A page table is one page of 8-byte entries; a PMD entry maps one
	 * table's worth of pages: 2 MiB with 4 KiB pages, 512 MiB with 64 KiB. */
	os->pmd_size = os->page_size / 8 * os->page_size;
	read_thp(os->page_size, os->pmd_size, &os->thp);
	read_pools(os->pools);
	os->llc_size = read_llc_size();
	if (hz_prim_kernel_version(&os->kernel_major, &os->kernel_minor) != 0)
		os->kernel_major = os->kernel_minor = 0;
	os->overcommits = read_overcommits();
}

/* No lock (a lock taken inside malloc could be held by a thread a signal
 * handler interrupted, or by a thread that does not exist in a fork
 * child): each first caller fills a slot of its own, and the first to
 * finish publishes it. Slots are claimed only while nothing is published,
 * so a caller that finds none left waits for a fill in progress. A fork
 * child inherits the claims of fills other threads had in progress; four
 * slots cover three such forks in a row. Two more slots for hz_os_reload. */
#define FILL_SLOTS 4

static struct hz_os slots[FILL_SLOTS + 2];
static unsigned claimed;
static const struct hz_os *current;

const struct hz_os *hz_os(void)
{
	const struct hz_os *os = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
	const struct hz_os *expected = NULL;
	unsigned slot;
	int saved;

	if (os != NULL)
		return os;
	slot = __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED);
	if (slot >= FILL_SLOTS) {
		while ((os = __atomic_load_n(&current, __ATOMIC_ACQUIRE)) == NULL)
			hz_prim_sleep_ns(100000);
		return os;
	}
	saved = errno;
	fill(&slots[slot]);
	errno = saved;
	if (__atomic_compare_exchange_n(&current, &expected, &slots[slot], false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return &slots[slot];
	return expected;
}

void hz_os_reload(void)
{
	static unsigned flip;
	struct hz_os *next = &slots[FILL_SLOTS + (flip++ & 1)];
	int saved = errno;

	fill(next);
	errno = saved;
	__atomic_store_n(&current, next, __ATOMIC_RELEASE);
}

/* ---- /proc files ---- */

int hz_os_concat(char *buf, size_t size, const char *a, const char *b, const char *c)
{
	const char *parts[] = { a, b, c };
	size_t used = 0;

	for (size_t i = 0; i < 3 && parts[i]; i++) {
		size_t len = strlen(parts[i]);

		if (len >= size - used)
			return -ENAMETOOLONG;
		memcpy(buf + used, parts[i], len);
		used += len;
	}
	buf[used] = '\0';
	return 0;
}

/* /proc/PID/<name>; pid 0 is the calling process (the program's path:
 * hz_os_concat). */
static int open_proc(pid_t pid, const char *name)
{
	char path[64];
	int ret = 0;

	if (pid == 0)
		ret = hz_os_concat(path, sizeof(path), "/proc/self/", name, NULL);
	else
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return ret != 0 ? ret : hz_prim_open_read(path);
}

int hz_prim_open_maps(pid_t pid, bool smaps)
{
	return open_proc(pid, smaps ? "smaps" : "maps");
}

int hz_prim_open_pagemap(pid_t pid)
{
	return open_proc(pid, "pagemap");
}

/* The state field of a /proc/PID/stat line, "pid (comm) S ...", and the
 * rest of the line after it, or NULL: comm may hold spaces and
 * parentheses. */
static const char *stat_state(const char *line)
{
	const char *paren = strrchr(line, ')');

	return paren == NULL || paren[1] != ' ' || paren[2] == '\0' ? NULL : paren + 2;
}

int hz_prim_process_state(pid_t pid, char *state)
{
	char path[40], buf[512];
	const char *at;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (hz_prim_read_file(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	at = stat_state(buf);
	if (at == NULL)
		return -EINVAL;
	*state = *at;
	return 0;
}

/* Field n (3: the state, 20: num_threads, 52: exit_code) of a line of
 * /proc/PID/stat, from the state on, or NULL. */
static const char *stat_field(const char *state, unsigned n)
{
	for (unsigned i = 3; i < n && state != NULL; i++) {
		state = strchr(state, ' ');
		state = state ? state + 1 : NULL;
	}
	return state;
}

int hz_prim_main_thread_left(int *status)
{
	char buf[1024];
	const char *state, *threads, *code;

	if (hz_prim_read_file("/proc/self/stat", buf, sizeof(buf)) <= 0)
		return -ENOENT;
	state = stat_state(buf);
	threads = stat_field(state, 20);
	code = stat_field(state, 52);
	if (threads == NULL || code == NULL)
		return -EINVAL; /* unreadable, or before Linux 3.5 */
	/* The main thread stays, a zombie, until the last thread exits. */
	if (*state != 'Z' || strtoul(threads, NULL, 10) != 2)
		return 0;
	*status = (int)strtoul(code, NULL, 10);
	return 1;
}

int hz_prim_process_name(pid_t pid, char *name, size_t size)
{
	char path[40];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	n = hz_prim_read_file(path, name, size);
	if (n < 0)
		return (int)n;
	if (n > 0 && name[n - 1] == '\n')
		name[n - 1] = '\0';
	return 0;
}

int hz_prim_each_process(int (*fn)(pid_t pid, void *arg), void *arg)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int ret = 0;

	if (dir == NULL)
		return -errno;
	while (ret == 0 && (e = readdir(dir)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (end != e->d_name && *end == '\0' && pid > 0)
			ret = fn((pid_t)pid, arg);
	}
	closedir(dir);
	return ret;
}

int hz_prim_open_kpageflags(void)
{
	return hz_prim_open_read("/proc/kpageflags");
}

const char *hz_prim_self_exe_path(void)
{
	return "/proc/self/exe";
}

#define LINE_BUF 1024

int hz_os_each_line(const char *path, hz_os_line_fn *fn, void *ctx)
{
	char buf[LINE_BUF];
	size_t have = 0;
	bool skipping = false, stop = false;
	int fd = hz_prim_open_read(path);
	ssize_t n = 1;

	if (fd < 0)
		return fd;
	while (!stop && n > 0) {
		char *line = buf, *nl;

		n = hz_prim_read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0)
			break;
		have += (size_t)n;
		while (!stop && (nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
			*nl = '\0';
			stop = !skipping && fn(line, ctx);
			skipping = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (n == 0 && have > 0 && !skipping && !stop) { /* last line, no newline */
			buf[have] = '\0';
			fn(buf, ctx);
		}
		if (have == sizeof(buf) - 1) { /* too long: drop it up to its newline */
			skipping = true;
			have = 0;
		}
	}
	hz_prim_close(fd);
	return n < 0 ? (int)n : 0;
}

struct status_key {
	const char *key; /* with its colon */
	uint64_t value;
	bool found;
};

static bool status_line(char *line, void *ctx)
{
	struct status_key *k = ctx;
	size_t len = strlen(k->key);

	if (strncmp(line, k->key, len) != 0)
		return false;
	k->value = strtoull(line + len, NULL, 10);
	k->found = true;
	return true;
}

/* One number field of /proc/self/status, read when asked (threads and
 * mappings come and go). key includes its colon. */
static int status_field(const char *key, uint64_t *value)
{
	struct status_key k = { .key = key };
	int saved = errno, ret = hz_os_each_line("/proc/self/status", status_line, &k);

	errno = saved;
	if (ret != 0)
		return ret;
	if (!k.found)
		return -ENOENT;
	*value = k.value;
	return 0;
}

int hz_prim_thread_count(unsigned *count)
{
	uint64_t v;
	int ret = status_field("Threads:", &v);

	if (ret == 0)
		*count = (unsigned)v;
	return ret;
}

bool hz_prim_data_limited(void)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur != RLIM_INFINITY;
}

bool hz_prim_data_fits(size_t len)
{
	struct rlimit rl;
	uint64_t kib;

	if (getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return true;
	/* Unknown use: no, and the next allocator's mapping meets the
	 * kernel's own check. */
	if (status_field("VmData:", &kib) != 0)
		return false;
	return kib <= rl.rlim_cur / 1024 && len <= rl.rlim_cur - kib * 1024;
}

int hz_prim_seccomp_mode(unsigned *mode)
{
	uint64_t v;
	int ret = status_field("Seccomp:", &v);

	if (ret == 0)
		*mode = (unsigned)v;
	return ret;
}

/* The address space mapped now ("VmSize:", in kB there: no page-size unit
 * to guess). */
int hz_prim_address_space_used(uint64_t *bytes)
{
	int ret = status_field("VmSize:", bytes);

	if (ret == 0)
		*bytes <<= 10;
	return ret;
}

/* statm: one short line, cheaper to read than status (a miss reads it). */
int hz_prim_resident(uint64_t *bytes)
{
	char buf[128];
	ssize_t n = hz_prim_read_file("/proc/self/statm", buf, sizeof(buf));
	char *end;
	uint64_t pages;
	int saved = errno;

	if (n < 0)
		return (int)n;
	(void)strtoull(buf, &end, 10); /* the first field: size */
	pages = strtoull(end, &end, 10);
	errno = saved;
	if (*end != ' ')
		return -EINVAL;
	*bytes = pages * hz_prim_page_size();
	return 0;
}

/* ---- /tmp ---- */

int hz_prim_open_perfmap(void)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)hz_prim_getpid());
	return hz_prim_open_append(path);
}
