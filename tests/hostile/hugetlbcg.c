/* A hugetlb cgroup with hugetlb.2MB.max = 0 (what Kubernetes sets for
 * every pod that requests no huge pages) on a host whose 2 MiB pool has
 * free pages: the program's first write to a 64 MiB malloc must not get
 * SIGBUS (64 MiB, or what the pool holds). glibc never uses the pool. Root only: the case raises
 * vm.nr_hugepages (restored at the end, at exit and on signals) and
 * creates the cgroup. */
#include "cgroup.h"
#include "hostile.h"

#include <unistd.h>

#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
/* 64 MiB, or less when the kernel finds fewer free 2 MiB pages (memory
 * fragments on a busy machine): the block must fit in the pool's free
 * pages, or no allocator would take it from the pool and the case would
 * prove nothing. 40 pages, 80 MiB: a 64 MiB block with room left. */
#define BLOCK_MAX (64 * MiB)
#define BLOCK_MIN (8 * MiB)
#define POOL_RAISE 40

static int workload(void)
{
	const char *env = getenv("HOSTILE_BLOCK");
	size_t len = env ? strtoull(env, NULL, 10) : BLOCK_MAX;
	long long left = hostile_read_ll(POOL_DIR "/free_hugepages") -
			 hostile_read_ll(POOL_DIR "/resv_hugepages");
	char *p;

	/* Other programs may set vm.nr_hugepages too (other test runs). */
	if (left < (long long)(len / (2 * MiB)))
		SKIP("the pool shrank to %lld free pages before the malloc: someone else "
		     "changed vm.nr_hugepages", left);
	p = malloc(len);

	CHECK(p != NULL, "malloc");
	hostile_fill(p, len, 1);
	CHECK(hostile_check(p, len, 1) == len, "the block does not keep its bytes");
	free(p);
	hostile_use_new_block(len, true);
	puts("the block was written and read back");
	return 0;
}

/* Raise the pool; the block size that fits in its free pages. */
static size_t raise_pool(void)
{
	long long nr = hostile_read_ll(NR_PATH), free_pages = 0, resv = 0;
	size_t fits;
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
		if (free_pages - resv >= (long long)(BLOCK_MAX / (2 * MiB)))
			break;
	}
	fits = free_pages > resv ? (size_t)(free_pages - resv) * 2 * MiB : 0;
	if (fits < BLOCK_MIN) {
		hostile_undo_all();
		SKIP("the kernel found only %lld free 2 MiB pages (memory fragmented)",
		     free_pages - resv);
	}
	return fits < BLOCK_MAX ? fits : BLOCK_MAX;
}

int main(int argc, char **argv)
{
	struct cgroup cg;
	char why[256], block[32];
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
	snprintf(block, sizeof(block), "%zu", raise_pool());
	NOTE("a block of %s bytes", block);
	setenv("HOSTILE_BLOCK", block, 1);
	ret = cgroup_run_inside(&cg, "/proc/self/exe");
	hostile_undo_all();
	return ret;
}
