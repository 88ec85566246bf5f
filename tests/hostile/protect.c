/* A block whose protection the program changed, then freed without
 * undoing it: guard pages, read-only freezing, JIT code, protection keys,
 * sealing. glibc unmaps large chunks on free, so the change goes with the
 * mapping; the next owner of that memory must get a plain read-write
 * block, and nothing in the process may fault on the freed one. */
#include "hostile.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (4 * MiB)
#define PAGE 4096

static char *block(size_t len)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, PAGE, len) == 0, "posix_memalign(%zu)", len);
	hz_test_fill(p, len, 1);
	return p;
}

static void protect(void *p, size_t len, int prot)
{
	CHECK(mprotect(p, len, prot) == 0, "mprotect(%d): %s", prot, strerror(errno));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static int read_then_malloc(void)
{
	char *p = block(BLOCK);

	protect(p, BLOCK, PROT_READ);
	free(p);
	hostile_use_new_block(BLOCK, false);
	return 0;
}

static int read_then_calloc(void)
{
	char *p = block(BLOCK);

	protect(p, BLOCK, PROT_READ);
	free(p);
	hostile_use_new_block(BLOCK, true);
	return 0;
}

static void on_segv(int sig)
{
	static const char msg[] = "the program's own SIGSEGV handler ran\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0) {
		/* the exit status says it anyway */
	}
	_exit(3);
}

/* The program frees its frozen block and never allocates again: nothing
 * may touch the block behind its back, and a fault anywhere must reach
 * the program's own handler. It used calloc before (most programs do),
 * so that a cache which pre-zeroes for calloc wants the freed block. */
static int read_then_idle(void)
{
	char *earlier = hostile_keep(calloc(1, BLOCK));
	char *p = block(BLOCK);

	signal(SIGSEGV, on_segv);
	protect(p, BLOCK, PROT_READ);
	free(p);
	sleep_ms(2000);
	puts("still running after 2 s");
	free(earlier);
	return 0;
}

/* Guard pages at both ends of a block (as arenas and stacks carve them). */
static int none_guards(void)
{
	size_t len = 8 * MiB;
	char *p;

	hostile_skip_if_hugetlb_pool(); /* 4 KiB guards */
	p = block(len);

	protect(p, PAGE, PROT_NONE);
	protect(p + len - PAGE, PAGE, PROT_NONE);
	hz_test_fill(p + PAGE, len - 2 * PAGE, 2);
	free(p);
	hostile_use_new_block(len, false);
	hostile_use_new_block(len, true);
	sleep_ms(300);
	return 0;
}

/* A JIT buffer: code written, flipped to read+execute, run, freed. */
static int exec_flip(void)
{
#if defined(__x86_64__)
	static const unsigned char ret42[] = { 0xb8, 42, 0, 0, 0, 0xc3 }; /* mov eax,42; ret */
#elif defined(__aarch64__)
	static const unsigned char ret42[] = { 0x40, 0x05, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6 };
#else
	SKIP("no JIT snippet for this CPU");
#endif
	char *p = block(BLOCK);
	int (*fn)(void);

	memcpy(p, ret42, sizeof(ret42));
	__builtin___clear_cache(p, p + sizeof(ret42));
	protect(p, BLOCK, PROT_READ | PROT_EXEC);
	fn = (int (*)(void))(uintptr_t)p;
	CHECK(fn() == 42, "the JIT code did not run");
	free(p);
	hostile_use_new_block(BLOCK, false);
	hostile_use_new_block(BLOCK, true);
	sleep_ms(300);
	return 0;
}

/* Protection keys: a block tagged with a key whose writes are disabled. */
static int pkey_write_disabled(void)
{
#ifdef SYS_pkey_alloc
	char *p = block(BLOCK);
	long key = syscall(SYS_pkey_alloc, 0, 0x2 /* PKEY_DISABLE_WRITE */);

	if (key < 0)
		SKIP("no memory protection keys here (pkey_alloc: %s)", strerror(errno));
	CHECK(syscall(SYS_pkey_mprotect, p, BLOCK, PROT_READ | PROT_WRITE, key) == 0,
	      "pkey_mprotect: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, false);
	hostile_use_new_block(BLOCK, true);
	sleep_ms(300);
	return 0;
#else
	SKIP("this system has no pkey_alloc");
#endif
}

/* mseal (Linux 6.10): a frozen block sealed, so it can never change or
 * be unmapped. glibc's free then fails to unmap it and leaves it, which
 * is all anyone can do; the memory must never be handed out again. */
static int sealed_read_only(void)
{
#ifndef SYS_mseal
#define SYS_mseal 462
#endif
	char *p = block(BLOCK);

	protect(p, BLOCK, PROT_READ);
	if (syscall(SYS_mseal, p, BLOCK, 0) != 0)
		SKIP("mseal is not available here: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, false);
	hostile_use_new_block(BLOCK, true);
	sleep_ms(300);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "read_malloc", read_then_malloc },
		{ "read_calloc", read_then_calloc },
		{ "read_idle", read_then_idle },
		{ "none_guards", none_guards },
		{ "exec_flip", exec_flip },
		{ "pkey", pkey_write_disabled },
		{ "sealed", sealed_read_only },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
