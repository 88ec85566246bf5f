/* A memory cgroup limited to 1 GiB (a container): the program keeps two
 * live blocks of 150-350 MiB, written in full, and replaces one of them 40
 * times. Its peak is about 700 MB under glibc, which finishes; whatever an
 * allocator caches must fit under the limit too, or the kernel kills the
 * program. Root only (the case creates the cgroup and removes it).
 * Variants: none, the program sees its cgroup; "hidden", it runs in a mount
 * namespace whose /proc and /sys/fs/cgroup are empty (a minimal or
 * hardened container), where the limit cannot be read; its limit is 850
 * MiB, nearer glibc's peak. */
#include "cgroup.h"
#include "hostile.h"

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#define LIMIT "1073741824"
/* Hidden: 850 MiB, nearer glibc's peak (about 710 MB), so that a cache
 * that believes there is no limit meets it every run. */
#define LIMIT_HIDDEN "891289600"
#define ROUNDS 40

static int workload(void)
{
	char *slot[2] = { NULL, NULL };
	size_t len[2] = { 0, 0 };
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	for (int round = 0; round < ROUNDS; round++) {
		int i = round % 2;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		free(slot[i]);
		len[i] = (150 + (size_t)(rng % 201)) * MiB;
		slot[i] = round % 3 ? malloc(len[i]) : calloc(1, len[i]);
		CHECK(slot[i] != NULL, "round %d: allocating %zu MiB failed", round, len[i] / MiB);
		memset(slot[i], round + 1, len[i]);
		CHECK(slot[1 - i] == NULL || slot[1 - i][len[1 - i] - 1] == (char)round,
		      "round %d: the other block changed", round);
	}
	free(slot[0]);
	free(slot[1]);
	puts("40 rounds done");
	return 0;
}

/* Empty tmpfs over /proc and /sys/fs/cgroup, in a mount namespace of
 * this process's own. */
static void hide_proc_and_cgroups(void)
{
	CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make / private: %s",
	      strerror(errno));
	CHECK(mount("none", "/sys/fs/cgroup", "tmpfs", 0, NULL) == 0,
	      "tmpfs over /sys/fs/cgroup: %s", strerror(errno));
	CHECK(mount("none", "/proc", "tmpfs", 0, NULL) == 0, "tmpfs over /proc: %s",
	      strerror(errno));
}

int main(int argc, char **argv)
{
	struct cgroup cg;
	char why[256], peak[64] = "?", self[4096];
	bool hidden = argc == 2 && strcmp(argv[1], "hidden") == 0;
	const char *limit = hidden ? LIMIT_HIDDEN : LIMIT;
	ssize_t n;
	int ret;

	if (argc == 2 && strcmp(argv[1], "inside") == 0)
		return workload();
	if (argc == 2 && strcmp(argv[1], "inside_hidden") == 0) {
		hide_proc_and_cgroups();
		return workload();
	}
	/* The child execs this file by name: /proc/self/exe is gone there. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0, "/proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	if (cgroup_create("memory", &cg, why, sizeof(why)) != 0)
		SKIP("memory cgroup: %s", why);
	if (cg.v2) {
		CHECK(cgroup_set(&cg, "memory.max", limit) == 0, "memory.max: %s", strerror(errno));
		/* Swap would hide an overrun (the machine has none, usually). */
		cgroup_set(&cg, "memory.swap.max", "0");
	} else {
		CHECK(cgroup_set(&cg, "memory.limit_in_bytes", limit) == 0,
		      "memory.limit_in_bytes: %s", strerror(errno));
		cgroup_set(&cg, "memory.memsw.limit_in_bytes", limit);
	}
	ret = cgroup_run_inside_as(&cg, self, hidden ? "inside_hidden" : "inside");
	{
		char path[640];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", cg.dir,
			 cg.v2 ? "memory.peak" : "memory.max_usage_in_bytes");
		f = fopen(path, "r");
		if (f) {
			if (!fgets(peak, sizeof(peak), f))
				snprintf(peak, sizeof(peak), "?");
			peak[strcspn(peak, "\n")] = '\0';
			fclose(f);
		}
	}
	NOTE("peak usage in the cgroup: %s bytes", peak);
	hostile_undo_all();
	return ret;
}
