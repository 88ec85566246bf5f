/* madvise and userfaultfd by the program on its own block. Advice that
 * changes the mapping (dump, merge, huge pages, guard regions, a
 * userfaultfd) goes away with glibc's munmap at free: the next owner gets
 * a plain mapping. Advice that drops contents (DONTNEED, FREE, PAGEOUT)
 * must leave calloc's promise intact. */
#include "hostile.h"

#include <time.h>

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define BLOCK (8 * MiB)
#define PAGE 4096

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static char *block(void)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, PAGE, BLOCK) == 0, "posix_memalign");
	hz_test_fill(p, BLOCK, 1);
	return p;
}

/* The next block malloc gives is writable and has no VmFlags flag. */
static void next_block_lacks(const char *flag)
{
	char *q = malloc(BLOCK);

	CHECK(q != NULL, "malloc");
	hz_test_fill(q, BLOCK, 2);
	CHECK(!hostile_vmflag(q, BLOCK, flag), "the new block has VmFlags %s", flag);
	free(q);
	q = calloc(1, BLOCK);
	CHECK(q != NULL && hz_test_first_nonzero(q, BLOCK) == BLOCK, "calloc not zero");
	CHECK(!hostile_vmflag(q, BLOCK, flag), "the new calloc block has VmFlags %s", flag);
	free(q);
}

static int advised_then_freed(int advice, const char *name, const char *flag)
{
	char *p = block();

	if (madvise(p, BLOCK, advice) != 0)
		SKIP("madvise(%s) is not available here: %s", name, strerror(errno));
	CHECK(hostile_vmflag(p, BLOCK, flag), "madvise(%s) did not set VmFlags %s", name, flag);
	free(p);
	next_block_lacks(flag);
	return 0;
}

static int dontdump(void)
{
	return advised_then_freed(MADV_DONTDUMP, "MADV_DONTDUMP", "dd");
}

static int mergeable(void)
{
	hostile_skip_if_hugetlb_pool(); /* KSM does not merge hugetlb pages */
	return advised_then_freed(MADV_MERGEABLE, "MADV_MERGEABLE", "mg");
}

static int nohugepage(void)
{
	return advised_then_freed(MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE", "nh");
}

/* Dropped pages of private anonymous memory read zero; the rest keeps
 * its bytes. */
static int dontneed(void)
{
	char *p;

	hostile_skip_if_hugetlb_pool();
	p = block();

	CHECK(madvise(p + MiB, 2 * MiB, MADV_DONTNEED) == 0, "madvise: %s", strerror(errno));
	CHECK(hz_test_first_nonzero(p + MiB, 2 * MiB) == 2 * MiB, "dropped pages not zero");
	CHECK(hz_test_check(p, MiB, 1) == MiB, "the bytes before changed");
	free(p);
	hostile_use_new_block(BLOCK, true);
	return 0;
}

/* MADV_FREE'd pages may read old bytes or zero until written again. */
static int lazy_free(void)
{
	char *p;

	hostile_skip_if_hugetlb_pool();
	p = block();

	CHECK(madvise(p + MiB, 4 * MiB, MADV_FREE) == 0, "madvise: %s", strerror(errno));
	memset(p + 2 * MiB, 3, PAGE);
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	return 0;
}

/* Paged out to swap: not resident, still holding the program's bytes. */
/* The LazyFree kilobytes of the mappings over [p, p + len) (smaps): the
 * preload's THP advice on the part of a range written after its first
 * MiBs makes that part a mapping of its own. */
static long long lazy_free_kib(const void *p, size_t len)
{
	return (long long)(hostile_smaps_sum(p, len, "LazyFree:") >> 10);
}

/* A 256 MiB anonymous mmap written in full, then given back with
 * MADV_FREE (as allocators purge): the pages stay lazily freed, which the
 * kernel reclaims under pressure. Large requests and two seconds later
 * nothing has made them resident for good (a collapse into huge pages
 * did: LazyFree went from 256 MiB to 0, and the cgroup could not shrink). */
static int lazy_free_mmap_stays_lazy(void)
{
	size_t len = 256 * MiB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	long long before, after;

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	memset(p, 1, len);
	CHECK(madvise(p, len, MADV_FREE) == 0, "MADV_FREE: %s", strerror(errno));
	before = lazy_free_kib(p, len);
	if (before < (long long)(len >> 10) / 2)
		SKIP("MADV_FREE left only %lld KiB lazily freed here", before);
	for (int i = 0; i < 20; i++) {
		free(hostile_keep(malloc(4 * MiB)));
		nanosleep(&tick, NULL);
	}
	after = lazy_free_kib(p, len);
	CHECK(after >= before * 9 / 10, "LazyFree went from %lld to %lld KiB", before, after);
	printf("the lazily freed pages stayed lazily freed\n");
	munmap(p, len);
	return 0;
}

static int pageout(void)
{
	char *p = block(), *q;

	if (hostile_read_ll("/proc/sys/vm/swappiness") < 0 || hostile_status_bytes("VmSwap:") < 0)
		SKIP("no swap accounting here");
	CHECK(madvise(p, BLOCK, MADV_PAGEOUT) == 0 || errno == EINVAL, "madvise: %s",
	      strerror(errno));
	if (hostile_status_bytes("VmSwap:") == 0)
		SKIP("MADV_PAGEOUT swapped nothing out (no swap device)");
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "the paged-out bytes came back wrong");
	CHECK(madvise(p, BLOCK, MADV_PAGEOUT) == 0, "madvise: %s", strerror(errno));
	free(p);
	q = calloc(1, BLOCK);
	CHECK(q && hz_test_first_nonzero(q, BLOCK) == BLOCK, "calloc not zero");
	free(q);
	return 0;
}

/* process_madvise (Linux 5.10) on the program's own block, as a memory
 * manager does to age its cold buffers: content advice, so the freed block
 * stays plain, and later callocs are zero. */
static int process_cold(void)
{
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
	char *p = block();
	struct iovec iov = { p, BLOCK };
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	long ret;

	if (pidfd < 0)
		SKIP("pidfd_open: %s", strerror(errno));
	ret = syscall(SYS_process_madvise, pidfd, &iov, 1UL, MADV_COLD, 0U);
	if (ret < 0)
		SKIP("process_madvise(MADV_COLD) is not available here: %s", strerror(errno));
	CHECK(ret == (long)BLOCK, "process_madvise advised %ld bytes, not %ld", ret, (long)BLOCK);
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "the advised bytes changed");
	close(pidfd);
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	return 0;
}

/* Guard regions (Linux 6.13): no VMA change, and MADV_DONTNEED keeps them;
 * munmap removes them. */
static int guard_regions(void)
{
	char *p;

	hostile_skip_if_hugetlb_pool(); /* 4 KiB guard regions */
	p = block();

	if (madvise(p, PAGE, MADV_GUARD_INSTALL) != 0)
		SKIP("MADV_GUARD_INSTALL is not available here: %s", strerror(errno));
	CHECK(madvise(p + BLOCK - PAGE, PAGE, MADV_GUARD_INSTALL) == 0, "madvise: %s",
	      strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, false);
	hostile_use_new_block(BLOCK, true);
	return 0;
}

static int open_userfaultfd(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);

	if (fd < 0) /* unprivileged and vm.unprivileged_userfaultfd=0 */
		fd = syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */);
	if (fd < 0)
		SKIP("userfaultfd is not allowed here: %s", strerror(errno));
	CHECK(ioctl((int)fd, UFFDIO_API, &api) == 0, "UFFDIO_API: %s", strerror(errno));
	return (int)fd;
}

/* A block registered for missing-page faults (no one serves them: the
 * program has stopped using it) and freed without unregistering. A fault
 * on it would wait forever: the alarm turns that into a signal. */
static int userfaultfd_registered(void)
{
	void *p = NULL;
	int fd = open_userfaultfd();
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };

	CHECK(posix_memalign(&p, PAGE, BLOCK) == 0, "posix_memalign");
	reg.range.start = (uintptr_t)p;
	reg.range.len = BLOCK;
	CHECK(ioctl(fd, UFFDIO_REGISTER, &reg) == 0, "UFFDIO_REGISTER: %s", strerror(errno));
	free(p);
	alarm(10);
	hostile_use_new_block(BLOCK, false);
	hostile_use_new_block(BLOCK, true);
	usleep(300 * 1000);
	hostile_use_new_block(BLOCK, true);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "dontdump", dontdump },
		{ "mergeable", mergeable },
		{ "nohugepage", nohugepage },
		{ "dontneed", dontneed },
		{ "free", lazy_free },
		{ "free_mmap_stays_lazy", lazy_free_mmap_stays_lazy },
		{ "pageout", pageout },
		{ "process_cold", process_cold },
		{ "guard", guard_regions },
		{ "userfaultfd", userfaultfd_registered },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
