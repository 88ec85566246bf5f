/* What fork inherits. MADV_DONTFORK (RDMA, DPDK and VFIO set it on
 * registered buffers) and MADV_WIPEONFORK (random-number state) are
 * properties of a mapping: glibc's free unmaps them with the block, so
 * memory malloc hands out later is inherited by a child like any other.
 * A child may also change its copy of a block without touching the
 * parent's. */
#include "hostile.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (16 * MiB)
#define PAGE 4096

static char *block(unsigned seed)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, PAGE, BLOCK) == 0, "posix_memalign");
	hz_test_fill(p, BLOCK, seed);
	return p;
}

static void advise(void *p, int advice, const char *name)
{
	CHECK(madvise(p, BLOCK, advice) == 0, "madvise(%s): %s", name, strerror(errno));
}

static pid_t fork_checked(void)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	return pid;
}

/* The registered buffer was freed before the fork; the child's large
 * allocations get memory it really has. */
static int dontfork_freed_then_child_allocates(void)
{
	char *p = block(1);
	pid_t pid;

	advise(p, MADV_DONTFORK, "MADV_DONTFORK");
	free(p);
	pid = fork_checked();
	if (pid == 0) {
		hostile_use_new_block(BLOCK, true);
		hostile_use_new_block(BLOCK, false);
		exit(0);
	}
	return hostile_wait(pid);
}

/* A block malloc hands out after one with fork advice (already applied
 * to p) was freed is the child's too, like any other. */
static int freed_then_reused_is_inherited(char *p)
{
	char *q;
	pid_t pid;

	free(p);
	q = malloc(BLOCK);
	CHECK(q != NULL, "malloc");
	hz_test_fill(q, BLOCK, 2);
	pid = fork_checked();
	if (pid == 0) {
		size_t off = hz_test_check(q, BLOCK, 2);

		CHECK(off == BLOCK, "the child's copy differs at offset %zu", off);
		exit(0);
	}
	free(q);
	return hostile_wait(pid);
}

static int dontfork_freed_then_reused_is_inherited(void)
{
	char *p = block(1);

	advise(p, MADV_DONTFORK, "MADV_DONTFORK");
	return freed_then_reused_is_inherited(p);
}

/* madvise as the program's own system call instruction (a runtime's own
 * stub), which no interposer sees: not even the preload's syscall(). */
static long own_madvise(void *p, size_t len, int advice)
{
	long ret;
#if defined(__x86_64__)
	__asm__ __volatile__("syscall"
			     : "=a"(ret)
			     : "0"((long)SYS_madvise), "D"(p), "S"(len), "d"((long)advice)
			     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_madvise;
	register long x0 __asm__("x0") = (long)p;
	register long x1 __asm__("x1") = (long)len;
	register long x2 __asm__("x2") = advice;

	__asm__ __volatile__("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	ret = x0;
#else
	return syscall(SYS_madvise, p, len, advice);
#endif
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* As above, with the advice given by the program's own system call
 * instruction, which no wrapper sees: the freed block's memory is a hole
 * in the child, which must still get working blocks from malloc and
 * calloc. */
static int dontfork_raw_freed_then_child_allocates(void)
{
	char *p = block(1);
	pid_t pid;

	CHECK(own_madvise(p, BLOCK, MADV_DONTFORK) == 0, "madvise: %s",
	      strerror(errno));
	free(p);
	pid = fork_checked();
	if (pid == 0) {
		hostile_use_new_block(BLOCK, false);
		hostile_use_new_block(BLOCK, true);
		exit(0);
	}
	return hostile_wait(pid);
}

static int dontfork_raw_freed_then_child_callocs(void)
{
	char *p = block(1);
	pid_t pid;

	CHECK(own_madvise(p, BLOCK, MADV_DONTFORK) == 0, "madvise: %s",
	      strerror(errno));
	free(p);
	pid = fork_checked();
	if (pid == 0) {
		hostile_use_new_block(BLOCK, true);
		exit(0);
	}
	return hostile_wait(pid);
}

/* The registered buffer stays live in the parent; the child never
 * touches it and allocates its own. */
static int dontfork_live_then_child_allocates(void)
{
	char *p = block(1);
	pid_t pid;
	int ret;

	advise(p, MADV_DONTFORK, "MADV_DONTFORK");
	pid = fork_checked();
	if (pid == 0) {
		for (int i = 0; i < 4; i++)
			hostile_use_new_block(BLOCK, i % 2);
		exit(0);
	}
	ret = hostile_wait(pid);
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "the parent's buffer changed");
	free(p);
	hostile_use_new_block(BLOCK, true);
	return ret;
}

static int wipeonfork_freed_then_reused_is_inherited(void)
{
	char *p;

	hostile_skip_if_hugetlb_pool(); /* no MADV_WIPEONFORK on hugetlb */
	p = block(1);
	if (madvise(p, BLOCK, MADV_WIPEONFORK) != 0)
		SKIP("MADV_WIPEONFORK is not available: %s", strerror(errno));
	return freed_then_reused_is_inherited(p);
}

/* The child freezes its copy and frees it; the parent's stays writable. */
static int child_mprotects_its_copy(void)
{
	char *p = block(1);
	pid_t pid = fork_checked();
	int ret;

	if (pid == 0) {
		CHECK(mprotect(p, BLOCK, PROT_READ) == 0, "mprotect: %s", strerror(errno));
		free(p);
		hostile_use_new_block(BLOCK, false);
		hostile_use_new_block(BLOCK, true);
		exit(0);
	}
	ret = hostile_wait(pid);
	CHECK(hz_test_check(p, BLOCK, 1) == BLOCK, "the parent's block changed");
	hz_test_fill(p, BLOCK, 3);
	free(p);
	hostile_use_new_block(BLOCK, true);
	return ret;
}

/* A large shared anonymous mapping is shared with the child. */
static int shared_anonymous_is_shared(void)
{
	char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int ret;

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	pid = fork_checked();
	if (pid == 0) {
		hz_test_fill(p, BLOCK, 4);
		exit(0);
	}
	ret = hostile_wait(pid);
	CHECK(hz_test_check(p, BLOCK, 4) == BLOCK, "the child's writes are not in the parent");
	CHECK(munmap(p, BLOCK) == 0, "munmap: %s", strerror(errno));
	return ret;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "dontfork_freed", dontfork_freed_then_child_allocates },
		{ "dontfork_reused", dontfork_freed_then_reused_is_inherited },
		{ "dontfork_live", dontfork_live_then_child_allocates },
		{ "dontfork_raw_malloc", dontfork_raw_freed_then_child_allocates },
		{ "dontfork_raw_calloc", dontfork_raw_freed_then_child_callocs },
		{ "wipeonfork_reused", wipeonfork_freed_then_reused_is_inherited },
		{ "child_mprotect", child_mprotects_its_copy },
		{ "shared_anonymous", shared_anonymous_is_shared },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
