/* Stacks the program makes itself, with the guard page every runtime puts
 * below one: a signal stack and a thread stack in malloc'd blocks, and
 * coroutine stacks from mmap (as boost.context's protected stacks). Each
 * is used, torn down the way real programs do (the guard left in place),
 * and the memory's next owner gets a plain block. */
#include "hostile.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK (8 * MiB)
#define PAGE 4096

static char *guarded_block(size_t len)
{
	void *p = NULL;

	hostile_skip_if_hugetlb_pool(); /* a 4 KiB guard page */
	CHECK(posix_memalign(&p, PAGE, len) == 0, "posix_memalign");
	CHECK(mprotect(p, PAGE, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
	return p;
}

/* Deep enough to use about 1 MiB of stack. */
static unsigned burn(unsigned depth)
{
	volatile char frame[1024];

	frame[0] = (char)depth;
	return depth == 0 ? 1u : burn(depth - 1) + (unsigned char)frame[0];
}

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled = burn(1000) != 0;
}

static int signal_stack(void)
{
	char *p = guarded_block(STACK);
	stack_t ss = { .ss_sp = p + PAGE, .ss_size = STACK - PAGE }, off = { .ss_flags = SS_DISABLE };
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };

	CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack: %s", strerror(errno));
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	raise(SIGUSR1);
	CHECK(handled, "the handler did not run");
	CHECK(sigaltstack(&off, NULL) == 0, "sigaltstack(SS_DISABLE): %s", strerror(errno));
	free(p);
	hostile_use_new_block(STACK, false);
	hostile_use_new_block(STACK, true);
	return 0;
}

static void *thread_main(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)burn(2000);
}

/* Sizes grow: glibc raises its mmap threshold at each free, and would
 * carve a smaller block from its heap, where its free writes into the
 * block's first bytes (the guard page there is the program's bug). */
static int thread_stack(void)
{
	for (int round = 0; round < 4; round++) {
		size_t len = STACK + (size_t)round * 2 * MiB;
		char *p = guarded_block(len);
		pthread_attr_t attr;
		pthread_t t;
		void *ret;

		pthread_attr_init(&attr);
		CHECK(pthread_attr_setstack(&attr, p + PAGE, len - PAGE) == 0, "setstack");
		CHECK(pthread_create(&t, &attr, thread_main, NULL) == 0, "pthread_create");
		CHECK(pthread_join(t, &ret) == 0 && ret != NULL, "pthread_join");
		pthread_attr_destroy(&attr);
		free(p);
		hostile_use_new_block(len, round % 2);
	}
	return 0;
}

static ucontext_t main_ctx, co_ctx;

static void coroutine(void)
{
	burn(3000);
}

static void run_coroutine(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(hz_test_first_nonzero(p, len) == len, "a new anonymous mapping is not zero");
	CHECK(mprotect(p, PAGE, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
	CHECK(getcontext(&co_ctx) == 0, "getcontext");
	co_ctx.uc_stack.ss_sp = p + PAGE;
	co_ctx.uc_stack.ss_size = len - PAGE;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, coroutine, 0);
	CHECK(swapcontext(&main_ctx, &co_ctx) == 0, "swapcontext");
	CHECK(munmap(p, len) == 0, "munmap: %s", strerror(errno));
}

/* mmap, guard page at the bottom, run, munmap; 24 times, sizes varied. */
static int coroutine_stacks(void)
{
	for (int round = 0; round < 24; round++) {
		size_t len = (4 + (size_t)(round % 5) * 2) * MiB;

		run_coroutine(len);
		hostile_use_new_block(len, round % 2);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "sigaltstack", signal_stack },
		{ "pthread", thread_stack },
		{ "coroutine", coroutine_stacks },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
