/* The memory calls of the other cases, made by number through the C
 * library's syscall() instead of its wrappers: runtimes do that for
 * advice or calls their C library has no function for (glibc 2.36 has no
 * mseal), or to skip a wrapper. glibc unmaps a large chunk on free either
 * way, so the next owner of the memory gets a plain block. */
#include "hostile.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (8 * MiB)
#define VIEW_AT (2 * MiB)
#define VIEW (3 * MiB)
#define PAGE 4096

static char *block(void)
{
	void *p = NULL;

	hostile_skip_if_hugetlb_pool(); /* ranges at 4 KiB granularity */
	CHECK(posix_memalign(&p, PAGE, BLOCK) == 0, "posix_memalign");
	hz_test_fill(p, BLOCK, 1);
	return p;
}

static void raw_protect(void *p, size_t len, int prot)
{
	CHECK(syscall(SYS_mprotect, p, len, prot) == 0, "syscall(SYS_mprotect, %d): %s", prot,
	      strerror(errno));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static int mprotect_read_then_malloc(void)
{
	char *p = block();

	raw_protect(p, BLOCK, PROT_READ);
	free(p);
	hostile_use_new_block(BLOCK, false);
	return 0;
}

static int mprotect_read_then_calloc(void)
{
	char *p = block();

	raw_protect(p, BLOCK, PROT_READ);
	free(p);
	hostile_use_new_block(BLOCK, true);
	return 0;
}

/* Guard pages at both ends, freed, and the program idles: nothing may
 * touch the block behind its back (a calloc earlier, so a cache that
 * pre-zeroes for calloc wants the freed block). */
static int mprotect_guards_then_idle(void)
{
	char *earlier = hostile_keep(calloc(1, BLOCK));
	char *p = block();

	raw_protect(p, PAGE, PROT_NONE);
	raw_protect(p + BLOCK - PAGE, PAGE, PROT_NONE);
	free(p);
	sleep_ms(500);
	free(earlier);
	sleep_ms(300);
	return 0;
}

/* A private file view placed over part of the block by number, then the
 * block freed: calloc's memory must be zero, not the file's bytes. */
static int mmap_fixed_private_file_then_calloc(void)
{
	int fd = hostile_temp_file(4 * MiB, 0xab);
	char *p = block();
	long v = syscall(SYS_mmap, p + VIEW_AT, VIEW, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_FIXED, fd, 0L);

	CHECK(v == (long)(p + VIEW_AT), "syscall(SYS_mmap, MAP_FIXED): %s", strerror(errno));
	CHECK(p[VIEW_AT] == (char)0xab, "the view does not show the file");
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	close(fd);
	return 0;
}

/* The program's own shared view, mapped and unmapped by number: the
 * unmap must succeed, and the file must keep what the program wrote. */
static int mmap_fixed_shared_file_munmap(void)
{
	int fd = hostile_temp_file(4 * MiB, 0xab);
	char *p = block();
	long v = syscall(SYS_mmap, p + VIEW_AT, VIEW, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, 0L);
	unsigned char buf[PAGE];

	CHECK(v == (long)(p + VIEW_AT), "syscall(SYS_mmap, MAP_FIXED): %s", strerror(errno));
	memset(p + VIEW_AT, 0xcd, PAGE);
	CHECK(syscall(SYS_munmap, p + VIEW_AT, VIEW) == 0,
	      "syscall(SYS_munmap) of the program's own view: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	CHECK(pread(fd, buf, PAGE, 0) == PAGE && buf[0] == 0xcd && buf[PAGE - 1] == 0xcd,
	      "the file lost what the program wrote");
	CHECK(pread(fd, buf, PAGE, PAGE) == PAGE && buf[0] == 0xab, "the file was overwritten");
	close(fd);
	return 0;
}

/* A bug glibc tolerates: the program unmaps the tail of its block (to
 * "give back" memory it will not use), then frees the block. glibc's free
 * unmaps the rest; later blocks must work. What the unmap returns is not
 * compared: glibc's allocator cannot refuse it, a recycler must. */
static int munmap_tail_then_reuse(void)
{
	char *p = block();
	long ret = syscall(SYS_munmap, p + BLOCK - 2 * MiB, 2 * MiB);

	NOTE("syscall(SYS_munmap) of the block's tail returned %ld (%s)", ret,
	     ret == 0 ? "done" : strerror(errno));
	free(p);
	for (int i = 0; i < 4; i++)
		hostile_use_new_block(BLOCK, i % 2);
	return 0;
}

/* Advice by number that a freed block must not pass on. */
static int madvise_dontdump_then_reuse(void)
{
	char *p = block(), *q;

	CHECK(syscall(SYS_madvise, p, BLOCK, MADV_DONTDUMP) == 0, "syscall(SYS_madvise): %s",
	      strerror(errno));
	CHECK(hostile_vmflag(p, BLOCK, "dd"), "MADV_DONTDUMP did not set VmFlags dd");
	free(p);
	q = calloc(1, BLOCK);
	CHECK(q != NULL && hz_test_first_nonzero(q, BLOCK) == BLOCK, "calloc not zero");
	CHECK(!hostile_vmflag(q, BLOCK, "dd"), "the new block has VmFlags dd");
	free(q);
	return 0;
}

/* mseal (Linux 6.10; glibc 2.36 has no wrapper) of a writable block, as
 * a hardened program seals what must never be remapped: glibc's free then
 * fails to unmap it and leaves it, and the program's later blocks work. */
static int mseal_writable_then_reuse(void)
{
#ifndef SYS_mseal
#define SYS_mseal 462
#endif
	char *p = block();

	if (syscall(SYS_mseal, p, BLOCK, 0L) != 0)
		SKIP("mseal is not available here: %s", strerror(errno));
	free(p);
	for (int i = 0; i < 4; i++)
		hostile_use_new_block(BLOCK, i % 2);
	sleep_ms(300);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "mprotect_malloc", mprotect_read_then_malloc },
		{ "mprotect_calloc", mprotect_read_then_calloc },
		{ "mprotect_idle", mprotect_guards_then_idle },
		{ "mmap_private_file", mmap_fixed_private_file_then_calloc },
		{ "mmap_shared_munmap", mmap_fixed_shared_file_munmap },
		{ "munmap_tail", munmap_tail_then_reuse },
		{ "madvise_dontdump", madvise_dontdump_then_reuse },
		{ "mseal_writable", mseal_writable_then_reuse },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
