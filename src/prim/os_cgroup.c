/* The process's cgroups and their memory and hugetlb limits. See os.h.
 *
 * Everything is read into buffers on the stack: these run inside malloc
 * and free, on the pre-zero thread, and in fork children. */
#define HZ_OS_TESTING /* hz_os_set_root is defined here */
#include "os.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prim.h"

/* At or above this a limit means "none": v1 prints PAGE_COUNTER_MAX pages
 * (9223372036854771712 with 4 KiB pages) for an unlimited cgroup. */
#define LIMIT_NONE ((uint64_t)1 << 62)

static const char *root = "";

void hz_os_set_root(const char *dir)
{
	root = dir ? dir : "";
}

/* Whether word is in the comma-separated list. */
static bool has_word(const char *list, const char *word)
{
	size_t len = strlen(word);

	for (const char *at = list; (at = strstr(at, word)) != NULL; at += len)
		if ((at == list || at[-1] == ',') && (at[len] == '\0' || at[len] == ','))
			return true;
	return false;
}

/* ---- finding the cgroup ---- */

struct find {
	const char *controller;
	bool v2;
	char path[HZ_OS_CGROUP_PATH]; /* in the hierarchy, from /proc/self/cgroup */
	bool found;
};

/* /proc/self/cgroup: "ID:CONTROLLERS:PATH"; v2's line is "0::PATH". */
static bool cgroup_line(char *line, void *ctx)
{
	struct find *f = ctx;
	char *ctls = strchr(line, ':'), *path;

	if (ctls == NULL || (path = strchr(ctls + 1, ':')) == NULL)
		return false;
	*ctls++ = '\0';
	*path++ = '\0';
	if (f->v2 ? (strcmp(line, "0") != 0 || *ctls != '\0') : !has_word(ctls, f->controller))
		return false;
	f->found = hz_os_concat(f->path, sizeof(f->path), path, NULL, NULL) == 0;
	return true;
}

struct mount {
	struct find *find;
	struct hz_os_cgroup *cg;
	bool found;
};

/* The n-th space-separated field of line (cut there), or NULL. */
static char *field(char **line)
{
	char *f = *line, *sp;

	if (f == NULL)
		return NULL;
	sp = strchr(f, ' ');
	if (sp != NULL)
		*sp++ = '\0';
	*line = sp;
	return f;
}

/* /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...]
 * - FSTYPE SOURCE SUPEROPTS". A mount's ROOT is the part of the hierarchy
 * it shows (not "/" without a cgroup namespace in some containers), so
 * the cgroup's directory is MOUNTPOINT + (PATH - ROOT). */
static bool mount_line(char *line, void *ctx)
{
	struct mount *m = ctx;
	char *at = line, *mroot, *point, *type, *opts, *f;
	const char *rel = m->find->path;
	size_t rlen;

	for (int i = 0; i < 3; i++)
		field(&at);
	mroot = field(&at);
	point = field(&at);
	while ((f = field(&at)) != NULL && strcmp(f, "-") != 0)
		;
	type = field(&at);
	field(&at);
	opts = field(&at);
	if (mroot == NULL || point == NULL || type == NULL || opts == NULL)
		return false;
	if (m->find->v2 ? strcmp(type, "cgroup2") != 0
			: strcmp(type, "cgroup") != 0 || !has_word(opts, m->find->controller))
		return false;
	rlen = strcmp(mroot, "/") == 0 ? 0 : strlen(mroot);
	if (rlen != 0 && strncmp(rel, mroot, rlen) == 0 && (rel[rlen] == '/' || rel[rlen] == '\0'))
		rel += rlen;
	else if (rlen != 0)
		rel = ""; /* outside what the mount shows: its top is the nearest */
	if (strcmp(rel, "/") == 0)
		rel = "";
	if (hz_os_concat(m->cg->dir, sizeof(m->cg->dir), root, point, rel) != 0)
		return false;
	m->cg->top = strlen(root) + strlen(point);
	m->cg->v2 = m->find->v2;
	m->found = true;
	return true;
}

static int find_in(bool v2, const char *controller, struct hz_os_cgroup *cg)
{
	struct find f = { .controller = controller, .v2 = v2 };
	struct mount m = { .find = &f, .cg = cg };
	char path[HZ_OS_CGROUP_PATH];
	int ret;

	ret = hz_os_concat(path, sizeof(path), root, "/proc/self/cgroup", NULL);
	if (ret == 0)
		ret = hz_os_each_line(path, cgroup_line, &f);
	if (ret != 0)
		return ret;
	if (!f.found)
		return -ENOENT;
	ret = hz_os_concat(path, sizeof(path), root, "/proc/self/mountinfo", NULL);
	if (ret == 0)
		ret = hz_os_each_line(path, mount_line, &m);
	if (ret != 0)
		return ret;
	return m.found ? 0 : -ENOENT;
}

int hz_os_cgroup_find(const char *controller, struct hz_os_cgroup *cg)
{
	int saved = errno;
	int ret = find_in(false, controller, cg);

	if (ret == -ENOENT)
		ret = find_in(true, controller, cg);
	errno = saved;
	return ret;
}

/* ---- reading levels ---- */

/* A limit or usage file of dir: a number, or "max" (v2's none). */
static int read_value(const char *dir, const char *name, uint64_t *out)
{
	char path[HZ_OS_CGROUP_PATH + 64], buf[32];
	ssize_t n;

	if (hz_os_concat(path, sizeof(path), dir, "/", name) != 0)
		return -ENAMETOOLONG;
	n = hz_prim_read_file(path, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 ? (int)n : -EINVAL;
	if (strncmp(buf, "max", 3) == 0) {
		*out = HZ_OS_UNLIMITED;
		return 0;
	}
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	*out = strtoull(buf, NULL, 10);
	if (*out >= LIMIT_NONE)
		*out = HZ_OS_UNLIMITED;
	return 0;
}

/* Cut dir's last component; false at the top. */
static bool up(char *dir, size_t top)
{
	char *slash = strrchr(dir, '/');
	size_t len = strlen(dir);

	if (len <= top || slash == NULL || (size_t)(slash - dir) < top)
		return false;
	*slash = '\0';
	return true;
}

struct stat_key {
	const char *key;
	uint64_t value;
};

static bool stat_line(char *line, void *ctx)
{
	struct stat_key *k = ctx;
	size_t len = strlen(k->key);

	if (strncmp(line, k->key, len) != 0 || line[len] != ' ')
		return false;
	k->value = strtoull(line + len + 1, NULL, 10);
	return true;
}

/* Page cache reclaim takes first: inactive file pages of the level. */
static uint64_t inactive_file(const char *dir, bool v2)
{
	char path[HZ_OS_CGROUP_PATH + 64];
	/* v1's own counters leave out the children; total_ has them. */
	struct stat_key k = { v2 ? "inactive_file" : "total_inactive_file", 0 };

	if (hz_os_concat(path, sizeof(path), dir, "/memory.stat", NULL) != 0 ||
	    hz_os_each_line(path, stat_line, &k) != 0)
		return 0;
	return k.value;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t left(uint64_t limit, uint64_t used)
{
	if (limit == HZ_OS_UNLIMITED)
		return HZ_OS_UNLIMITED;
	return limit > used ? limit - used : 0;
}

/* One level's limit and room: 0, -ENOENT when it has no memory files
 * (the root cgroup, or v2 without the controller there), or the error of
 * reading its limit. */
static int memcg_level(const char *dir, bool v2, struct hz_os_memcg *m)
{
	uint64_t max = HZ_OS_UNLIMITED, high = HZ_OS_UNLIMITED, usage = 0, free_file;
	int ret = read_value(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &max);

	if (ret != 0)
		return ret;
	if (v2 && read_value(dir, "memory.high", &high) == 0)
		max = min_u64(max, high);
	m->limit = max;
	m->room = HZ_OS_UNLIMITED;
	if (max == HZ_OS_UNLIMITED)
		return 0;
	if (read_value(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &usage) != 0)
		usage = max; /* unknown: as if full */
	free_file = inactive_file(dir, v2);
	m->room = left(max, usage > free_file ? usage - free_file : 0);
	return 0;
}

int hz_os_memcg_read(const struct hz_os_cgroup *cg, struct hz_os_memcg *out)
{
	char dir[HZ_OS_CGROUP_PATH];
	int saved = errno, err = 0;

	out->limit = out->room = HZ_OS_UNLIMITED;
	memcpy(dir, cg->dir, sizeof(dir));
	dir[sizeof(dir) - 1] = '\0';
	do {
		struct hz_os_memcg level;
		int ret = memcg_level(dir, cg->v2, &level);

		if (ret != 0) {
			err = err || ret == -ENOENT ? err : ret;
			continue;
		}
		out->limit = min_u64(out->limit, level.limit);
		out->room = min_u64(out->room, level.room);
	} while (up(dir, cg->top));
	if (err)
		out->limit = out->room = HZ_OS_UNLIMITED;
	errno = saved;
	return err;
}

/* ---- the commit charge ---- */

/* The two lines of /proc/meminfo: "CommitLimit:    12345678 kB". */
struct commit_lines {
	uint64_t limit, used;
};

static bool meminfo_line(char *line, void *ctx)
{
	struct commit_lines *c = ctx;

	if (strncmp(line, "CommitLimit:", 12) == 0)
		c->limit = strtoull(line + 12, NULL, 10) << 10;
	else if (strncmp(line, "Committed_AS:", 13) == 0)
		c->used = strtoull(line + 13, NULL, 10) << 10;
	return c->limit != HZ_OS_UNLIMITED && c->used != HZ_OS_UNLIMITED;
}

int hz_os_commit_read(struct hz_os_memcg *out)
{
	struct commit_lines c = { HZ_OS_UNLIMITED, HZ_OS_UNLIMITED };
	char path[256];
	int saved = errno, ret;

	out->limit = out->room = HZ_OS_UNLIMITED;
	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	ret = hz_os_each_line(path, meminfo_line, &c);
	if (ret == 0 && (c.limit == HZ_OS_UNLIMITED || c.used == HZ_OS_UNLIMITED))
		ret = -EINVAL;
	if (ret == 0) {
		out->limit = c.limit;
		out->room = left(c.limit, c.used);
	}
	errno = saved;
	return ret;
}

/* The kernel's name of a hugetlb size in the cgroup files: "2MB", "1GB". */
static void size_name(size_t page_size, char *buf, size_t len)
{
	if (page_size >= ((size_t)1 << 30))
		snprintf(buf, len, "%zuGB", page_size >> 30);
	else if (page_size >= ((size_t)1 << 20))
		snprintf(buf, len, "%zuMB", page_size >> 20);
	else
		snprintf(buf, len, "%zuKB", page_size >> 10);
}

/* What one pair of files (limit, usage) leaves, or unlimited when the
 * level has no such limit file (the root, or the controller is off
 * there). Any other failure leaves nothing (*err set): a limit we could
 * not read may be 0. */
static uint64_t hugetlb_left(const char *dir, const char *limit_name, const char *usage_name,
			     int *err)
{
	uint64_t limit = HZ_OS_UNLIMITED, usage = 0;
	int ret = read_value(dir, limit_name, &limit);

	if (ret == 0 && limit != HZ_OS_UNLIMITED)
		ret = read_value(dir, usage_name, &usage);
	if (ret == -ENOENT && limit == HZ_OS_UNLIMITED)
		return HZ_OS_UNLIMITED;
	if (ret != 0) {
		*err = *err ? *err : ret;
		return 0;
	}
	return limit == HZ_OS_UNLIMITED ? HZ_OS_UNLIMITED : left(limit, usage);
}

int hz_os_hugetlb_room(const struct hz_os_cgroup *cg, size_t page_size, uint64_t *room)
{
	char dir[HZ_OS_CGROUP_PATH], name[16], files[4][48];
	int saved = errno, err = 0;

	size_name(page_size, name, sizeof(name));
	snprintf(files[0], sizeof(files[0]), "hugetlb.%s.%s", name, cg->v2 ? "max" : "limit_in_bytes");
	snprintf(files[1], sizeof(files[1]), "hugetlb.%s.%s", name, cg->v2 ? "current" : "usage_in_bytes");
	snprintf(files[2], sizeof(files[2]), "hugetlb.%s.rsvd.%s", name,
		 cg->v2 ? "max" : "limit_in_bytes");
	snprintf(files[3], sizeof(files[3]), "hugetlb.%s.rsvd.%s", name,
		 cg->v2 ? "current" : "usage_in_bytes");
	*room = HZ_OS_UNLIMITED;
	memcpy(dir, cg->dir, sizeof(dir));
	dir[sizeof(dir) - 1] = '\0';
	do {
		*room = min_u64(*room, hugetlb_left(dir, files[0], files[1], &err));
		*room = min_u64(*room, hugetlb_left(dir, files[2], files[3], &err));
	} while (up(dir, cg->top));
	if (err)
		*room = 0;
	errno = saved;
	return err;
}
