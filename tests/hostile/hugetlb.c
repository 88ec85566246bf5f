/* A host whose 2 MiB hugetlb pool has free pages (an administrator set
 * vm.nr_hugepages for a database, say). glibc never uses the pool, so a
 * program's large blocks are ordinary memory: it may madvise and mprotect
 * them at 4 KiB granularity, fork and write them in the child, and run in
 * a container whose hugetlb cgroup allows no huge pages (hugetlb.2MB.max
 * = 0: what Kubernetes sets for every pod that requests none).
 *
 * Root only: the case raises vm.nr_hugepages (restored at the end, at exit
 * and on signals) and, for the cgroup, creates one. Blocks are sized to
 * the free pages the kernel found (memory fragments on a busy machine):
 * a block the pool cannot hold would not come from it, and the case would
 * prove nothing. Other programs may change vm.nr_hugepages meanwhile (other
 * test runs): the program then skips.
 *
 * usage: hugetlb cgroup|dontneed|guard|fork */
#include "cgroup.h"
#include "hostile.h"

#include <sys/mman.h>
#include <unistd.h>

#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
#define HPAGE (2 * MiB)
/* The cgroup case's 64 MiB block, and the others' 8 MiB. */
#define CGROUP_BLOCK (64 * MiB)
#define BLOCK (8 * MiB)

static long long pool_left(void)
{
	return hostile_read_ll(POOL_DIR "/free_hugepages") -
	       hostile_read_ll(POOL_DIR "/resv_hugepages");
}

/* Raise the pool by up to pages; returns how many free pages it has, at
 * least min, or skips. */
static size_t raise_pool(long long pages, long long min)
{
	long long nr = hostile_read_ll(NR_PATH), left = 0;
	char text[32];

	if (geteuid() != 0)
		SKIP("changing vm.nr_hugepages needs root");
	if (access(POOL_DIR, F_OK) != 0)
		SKIP("the kernel has no 2 MiB hugetlb pool");
	CHECK(nr >= 0, "cannot read %s", NR_PATH);
	snprintf(text, sizeof(text), "%lld\n", nr);
	hostile_undo_write(NR_PATH, text);
	snprintf(text, sizeof(text), "%lld\n", nr + pages);
	/* A second try after compaction finds more free 2 MiB pages. */
	for (int tries = 0; tries < 2 && left < pages; tries++) {
		if (tries)
			hostile_write("/proc/sys/vm/compact_memory", "1\n");
		CHECK(hostile_write(NR_PATH, text) == 0, "raising %s: %s", NR_PATH,
		      strerror(errno));
		left = pool_left();
	}
	if (left < min) {
		hostile_undo_all();
		SKIP("environment changed: the kernel found only %lld free 2 MiB pages "
		     "(memory fragmented, or taken by others)", left);
	}
	return (size_t)left;
}

/* A block the pool could hold, right before the allocation. */
static char *block_the_pool_holds(size_t len)
{
	long long left = pool_left();
	char *p;

	if (left < (long long)(len / HPAGE))
		SKIP("environment changed: the pool shrank to %lld free pages before the "
		     "allocation (someone else changed vm.nr_hugepages)", left);
	/* Page-aligned, so the program's own madvise and mprotect calls are
	 * valid under glibc too. */
	CHECK(posix_memalign((void **)&p, 4096, len) == 0, "posix_memalign");
	return p;
}

/* ---- in the cgroup ---- */

static int cgroup_workload(void)
{
	const char *env = getenv("HOSTILE_BLOCK");
	size_t len = env ? strtoull(env, NULL, 10) : CGROUP_BLOCK;
	char *p = block_the_pool_holds(len);

	hz_test_fill(p, len, 1);
	CHECK(hz_test_check(p, len, 1) == len, "the block does not keep its bytes");
	free(p);
	hostile_use_new_block(len, true);
	puts("the block was written and read back");
	return 0;
}

static int in_cgroup(void)
{
	size_t fits = raise_pool(CGROUP_BLOCK / HPAGE + 8, BLOCK / HPAGE) * HPAGE;
	struct cgroup cg;
	char why[256], block[32];
	int ret;

	if (cgroup_create("hugetlb", &cg, why, sizeof(why)) != 0) {
		hostile_undo_all();
		SKIP("hugetlb cgroup: %s", why);
	}
	CHECK(cgroup_set(&cg, cg.v2 ? "hugetlb.2MB.max" : "hugetlb.2MB.limit_in_bytes", "0") == 0,
	      "hugetlb limit: %s", strerror(errno));
	snprintf(block, sizeof(block), "%zu", fits < CGROUP_BLOCK ? fits : CGROUP_BLOCK);
	NOTE("a block of %s bytes", block);
	setenv("HOSTILE_BLOCK", block, 1);
	ret = cgroup_run_inside(&cg, "/proc/self/exe");
	hostile_undo_all();
	return ret;
}

/* ---- on the host ---- */

/* MADV_DONTNEED on part of the block (as a program drops pages it is done
 * with) reads zero there and keeps the rest. */
static int dontneed(void)
{
	char *p;

	raise_pool(BLOCK / HPAGE, BLOCK / HPAGE);
	p = block_the_pool_holds(BLOCK);
	hz_test_fill(p, BLOCK, 1);
	CHECK(madvise(p + MiB, 2 * MiB, MADV_DONTNEED) == 0, "madvise(MADV_DONTNEED): %s",
	      strerror(errno));
	CHECK(hz_test_first_nonzero(p + MiB, 2 * MiB) == 2 * MiB, "dropped pages not zero");
	CHECK(hz_test_check(p, MiB, 1) == MiB, "the bytes before changed");
	free(p);
	hostile_undo_all();
	return 0;
}

/* A 4 KiB guard page inside the block, removed again before free. */
static int guard_page(void)
{
	char *p;

	raise_pool(BLOCK / HPAGE, BLOCK / HPAGE);
	p = block_the_pool_holds(BLOCK);
	CHECK(mprotect(p + MiB, 4096, PROT_NONE) == 0, "mprotect(PROT_NONE): %s", strerror(errno));
	CHECK(mprotect(p + MiB, 4096, PROT_READ | PROT_WRITE) == 0, "mprotect: %s",
	      strerror(errno));
	hz_test_fill(p, BLOCK, 1);
	free(p);
	hostile_undo_all();
	return 0;
}

/* Fork, then the child writes the block (a copy on write of every page)
 * while the pool has no page left: the program reserves the rest of the
 * pool for itself (a hugetlb mapping of its own, not touched). */
static int fork_then_child_writes(void)
{
	size_t rest;
	char *p, *own = MAP_FAILED;
	pid_t pid;
	int ret;

	raise_pool(BLOCK / HPAGE, BLOCK / HPAGE);
	p = block_the_pool_holds(BLOCK);
	hz_test_fill(p, BLOCK, 1);
	rest = pool_left() > 0 ? (size_t)pool_left() * HPAGE : 0;
	if (rest) {
		own = mmap(NULL, rest, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		CHECK(own != MAP_FAILED, "reserving the rest of the pool: %s", strerror(errno));
	}
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		hz_test_fill(p, BLOCK, 2);
		CHECK(hz_test_check(p, BLOCK, 2) == BLOCK, "the child's copy");
		exit(0);
	}
	ret = hostile_wait(pid);
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "the parent's block changed");
	if (own != MAP_FAILED)
		munmap(own, rest);
	free(p);
	hostile_undo_all();
	return ret;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "inside", cgroup_workload },
		{ "cgroup", in_cgroup },
		{ "dontneed", dontneed },
		{ "guard", guard_page },
		{ "fork", fork_then_child_writes },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
