/* A hugetlb cgroup with hugetlb.2MB.max = 0 (what Kubernetes sets for
 * every pod that requests no huge pages) on a host whose 2 MiB pool has
 * free pages: the program's first write to a 64 MiB malloc must not get
 * SIGBUS. glibc never uses the pool. Root only: the case raises
 * vm.nr_hugepages (restored at the end, at exit and on signals) and
 * creates the cgroup. */
#include "cgroup.h"
#include "hostile.h"

#include <unistd.h>

#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
#define BLOCK (64 * MiB)
/* 40 pages, 80 MiB: the whole block fits in the pool with room left. */
#define POOL_RAISE 40

static int workload(void)
{
	char *p = malloc(BLOCK);

	CHECK(p != NULL, "malloc");
	hostile_fill(p, BLOCK, 1);
	CHECK(hostile_check(p, BLOCK, 1) == BLOCK, "the block does not keep its bytes");
	free(p);
	hostile_use_new_block(BLOCK, true);
	puts("64 MiB written");
	return 0;
}

static void raise_pool(void)
{
	long long nr = hostile_read_ll(NR_PATH), free_pages, resv;
	char text[32];

	CHECK(nr >= 0, "cannot read %s", NR_PATH);
	snprintf(text, sizeof(text), "%lld\n", nr);
	hostile_undo_write(NR_PATH, text);
	snprintf(text, sizeof(text), "%lld\n", nr + POOL_RAISE);
	/* A second try after compaction: a busy machine's memory is
	 * fragmented, and the kernel then finds fewer free 2 MiB pages. */
	for (int tries = 0; tries < 2; tries++) {
		if (tries)
			hostile_write("/proc/sys/vm/compact_memory", "1\n");
		CHECK(hostile_write(NR_PATH, text) == 0, "raising %s: %s", NR_PATH,
		      strerror(errno));
		free_pages = hostile_read_ll(POOL_DIR "/free_hugepages");
		resv = hostile_read_ll(POOL_DIR "/resv_hugepages");
		if (free_pages - resv >= (long long)(BLOCK / (2 * MiB)))
			break;
	}
	if (free_pages - resv < (long long)(BLOCK / (2 * MiB))) {
		hostile_undo_all();
		SKIP("the kernel found only %lld free 2 MiB pages (memory fragmented)",
		     free_pages - resv);
	}
}

int main(int argc, char **argv)
{
	struct cgroup cg;
	char why[256];
	int ret;

	if (argc == 2 && strcmp(argv[1], "inside") == 0)
		return workload();
	if (geteuid() != 0)
		SKIP("hugetlb cgroup: needs root (vm.nr_hugepages, cgroups)");
	if (access(POOL_DIR, F_OK) != 0)
		SKIP("hugetlb cgroup: the kernel has no 2 MiB hugetlb pool");
	if (cgroup_create("hugetlb", &cg, why, sizeof(why)) != 0) {
		hostile_undo_all();
		SKIP("hugetlb cgroup: %s", why);
	}
	CHECK(cgroup_set(&cg, cg.v2 ? "hugetlb.2MB.max" : "hugetlb.2MB.limit_in_bytes", "0") == 0,
	      "hugetlb limit: %s", strerror(errno));
	raise_pool();
	ret = cgroup_run_inside(&cg, "/proc/self/exe");
	hostile_undo_all();
	return ret;
}
