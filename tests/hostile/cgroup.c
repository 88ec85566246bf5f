/* See cgroup.h. */
#include "cgroup.h"

#include "hostile.h"

#include <sys/stat.h>
#include <unistd.h>

/* Whether the whitespace-separated (or comma-separated) list has word. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *at = list; (at = strstr(at, word)) != NULL; at += n)
		if ((at == list || at[-1] == ' ' || at[-1] == ',') &&
		    (at[n] == '\0' || at[n] == ' ' || at[n] == ',' || at[n] == '\n'))
			return true;
	return false;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ret = -1;

	buf[0] = '\0';
	if (f) {
		if (fgets(buf, (int)len, f))
			ret = 0;
		fclose(f);
	}
	return ret;
}

/* The mount point of a cgroup2 file system (v2) or of the v1 hierarchy
 * holding controller; 0 or -1. */
static int find_mount(const char *controller, bool v2, char *dir, size_t len)
{
	FILE *f = fopen("/proc/mounts", "r");
	char dev[128], mnt[256], type[32], opts[512];
	int ret = -1;

	if (!f)
		return -1;
	while (ret != 0 && fscanf(f, "%127s %255s %31s %511s %*d %*d", dev, mnt, type, opts) == 4)
		if ((v2 && strcmp(type, "cgroup2") == 0) ||
		    (!v2 && strcmp(type, "cgroup") == 0 && has_word(opts, controller))) {
			snprintf(dir, len, "%s", mnt);
			ret = 0;
		}
	fclose(f);
	return ret;
}

/* This process's cgroup in the v2 hierarchy or in controller's v1 one. */
static int own_path(const char *controller, bool v2, char *path, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];
	int ret = -1;

	if (!f)
		return -1;
	while (ret != 0 && fgets(line, sizeof(line), f)) {
		char *ctls = strchr(line, ':'), *p;

		if (!ctls || !(p = strchr(ctls + 1, ':')))
			continue;
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		if ((v2 && strcmp(ctls + 1, "") == 0) || (!v2 && has_word(ctls + 1, controller))) {
			snprintf(path, len, "%s", strcmp(p, "/") == 0 ? "" : p);
			ret = 0;
		}
	}
	fclose(f);
	return ret;
}

/* v2: the parent must offer the controller to its children. */
static int enable_v2(const char *parent, const char *controller, char *why, size_t why_len)
{
	char path[640], line[512], text[64];

	snprintf(path, sizeof(path), "%s/cgroup.controllers", parent);
	if (read_line(path, line, sizeof(line)) != 0 || !has_word(line, controller)) {
		snprintf(why, why_len, "the %s controller is not available in %s", controller,
			 parent);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", parent);
	if (read_line(path, line, sizeof(line)) == 0 && has_word(line, controller))
		return 0;
	snprintf(text, sizeof(text), "+%s", controller);
	if (hostile_write(path, text) != 0) {
		snprintf(why, why_len, "cannot enable %s in %s: %s", controller, path,
			 strerror(errno));
		return -1;
	}
	snprintf(text, sizeof(text), "-%s", controller);
	hostile_undo_write(path, text);
	return 0;
}

int cgroup_create(const char *controller, struct cgroup *cg, char *why, size_t why_len)
{
	char mnt[256], own[256], parent[520];

	if (geteuid() != 0) {
		snprintf(why, why_len, "creating a cgroup needs root");
		return -1;
	}
	cg->v2 = find_mount(controller, false, mnt, sizeof(mnt)) != 0;
	if (cg->v2 && find_mount(controller, true, mnt, sizeof(mnt)) != 0) {
		snprintf(why, why_len, "no cgroup file system is mounted");
		return -1;
	}
	if (own_path(controller, cg->v2, own, sizeof(own)) != 0) {
		snprintf(why, why_len, "cannot find this process's cgroup");
		return -1;
	}
	snprintf(parent, sizeof(parent), "%s%s", mnt, own);
	if (cg->v2 && enable_v2(parent, controller, why, why_len) != 0)
		return -1;
	snprintf(cg->dir, sizeof(cg->dir), "%s/hz-hostile-%d", parent, (int)getpid());
	if (mkdir(cg->dir, 0755) != 0) {
		snprintf(why, why_len, "mkdir %s: %s", cg->dir, strerror(errno));
		return -1;
	}
	hostile_undo_rmdir(cg->dir);
	NOTE("cgroup %s (%s)", cg->dir, cg->v2 ? "v2" : "v1");
	return 0;
}

int cgroup_set(const struct cgroup *cg, const char *name, const char *text)
{
	char path[640];

	snprintf(path, sizeof(path), "%s/%s", cg->dir, name);
	return hostile_write(path, text);
}

int cgroup_run_inside(const struct cgroup *cg, const char *self)
{
	return cgroup_run_inside_as(cg, self, "inside");
}

int cgroup_run_inside_as(const struct cgroup *cg, const char *self, const char *arg)
{
	char pid_text[24];
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		snprintf(pid_text, sizeof(pid_text), "%d", (int)getpid());
		CHECK(cgroup_set(cg, "cgroup.procs", pid_text) == 0, "joining %s: %s", cg->dir,
		      strerror(errno));
		execl(self, self, arg, (char *)NULL);
		CHECK(0, "exec %s: %s", self, strerror(errno));
	}
	return hostile_wait(pid);
}
