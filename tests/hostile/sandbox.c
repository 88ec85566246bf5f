/* Programs under a seccomp filter that allows what glibc's malloc family
 * needs (mmap, munmap, mremap, mprotect, madvise, brk, futex) and the
 * program's own output, nothing more: browsers' renderers, OpenSSH's
 * privilege-separated child and many servers install one after start-up;
 * systemd's SystemCallFilter=, container runtimes and sandboxing launchers
 * install one before exec, and the program inherits it. Large allocations
 * must keep working, zeroed where promised, and nothing may be printed
 * that the program did not print. Variants:
 *  - eperm: installed after start-up, every other call fails with EPERM;
 *  - kill: the same with a kill-the-process default, installed after
 *    large blocks were freed and reused (the pre-zero thread's work);
 *  - inherited: a kill default installed before exec, which then also
 *    allows what the dynamic loader and glibc's start-up call. */
#include "hostile.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef SYS_rseq
#define SYS_rseq 334
#endif

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* What glibc's malloc family, stdio and exit call. */
#define ALLOW_RUNNING                                                          \
	ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_close), ALLOW(SYS_fstat), \
	ALLOW(SYS_newfstatat), ALLOW(SYS_lseek), ALLOW(SYS_mmap),              \
	ALLOW(SYS_munmap), ALLOW(SYS_mremap), ALLOW(SYS_mprotect),             \
	ALLOW(SYS_madvise), ALLOW(SYS_brk), ALLOW(SYS_futex),                  \
	ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_rt_sigreturn), ALLOW(SYS_exit),   \
	ALLOW(SYS_exit_group), ALLOW(SYS_getpid), ALLOW(SYS_gettid),           \
	ALLOW(SYS_clock_gettime), ALLOW(SYS_clock_nanosleep),                  \
	ALLOW(SYS_sched_yield)

/* And what the loader and glibc's start-up call before main. */
#define ALLOW_STARTING                                                         \
	ALLOW(SYS_execve), ALLOW(SYS_openat), ALLOW(SYS_pread64),              \
	ALLOW(SYS_set_tid_address), ALLOW(SYS_set_robust_list),                \
	ALLOW(SYS_rseq), ALLOW(SYS_prlimit64), ALLOW(SYS_getrandom)

#ifdef ARCH
#define ARCH_CHECK                                                             \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),                       \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),                   \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

static void install(struct sock_filter *code, unsigned short len)
{
	struct sock_fprog prog = { len, code };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		SKIP("seccomp filters are not allowed here: %s", strerror(errno));
}

static void sandbox_eperm(void)
{
	struct sock_filter code[] = {
		ARCH_CHECK, ALLOW_RUNNING,
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	install(code, sizeof(code) / sizeof(code[0]));
}

static void sandbox_kill(void)
{
	struct sock_filter code[] = {
		ARCH_CHECK, ALLOW_RUNNING,
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	install(code, sizeof(code) / sizeof(code[0]));
}

static void sandbox_before_exec(void)
{
	struct sock_filter code[] = {
		ARCH_CHECK, ALLOW_RUNNING, ALLOW_STARTING,
#ifdef SYS_arch_prctl
		ALLOW(SYS_arch_prctl),
#endif
#ifdef SYS_access
		ALLOW(SYS_access),
#endif
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	install(code, sizeof(code) / sizeof(code[0]));
}
#else
static void no_arch(void)
{
	SKIP("no seccomp architecture constant for this CPU");
}
#define sandbox_eperm no_arch
#define sandbox_kill no_arch
#define sandbox_before_exec no_arch
#endif

static void allocate_inside(void)
{
	char *p, *q;

	for (int round = 0; round < 3; round++) {
		for (size_t mib = 2; mib <= 64; mib *= 2)
			hostile_use_new_block(mib * MiB, round % 2);
		p = malloc(6 * MiB);
		CHECK(p != NULL, "malloc");
		hz_test_fill(p, 6 * MiB, 5);
		q = realloc(p, 30 * MiB);
		CHECK(q != NULL && hz_test_check(q, 6 * MiB, 5) == 6 * MiB, "realloc");
		free(q);
	}
	puts("allocations inside the sandbox worked");
}

static int v_eperm(void)
{
	/* Before the sandbox: the program's start-up, as usual. */
	hostile_use_new_block(8 * MiB, true);
	sandbox_eperm();
	allocate_inside();
	return 0;
}

static int v_kill(void)
{
	hostile_recycle(64 * MiB, 6, 100);
	sandbox_kill();
	allocate_inside();
	hostile_recycle(64 * MiB, 6, 100);
	return 0;
}

/* The launcher's side: filter, then exec this program again; the new
 * image runs under the filter from its first instruction. */
static int v_inherited(void)
{
	static char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *args[] = { exe, "inherited_child", NULL };

	CHECK(n > 0, "/proc/self/exe: %s", strerror(errno));
	exe[n] = '\0';
	fflush(stdout);
	sandbox_before_exec();
	execv(exe, args);
	CHECK(0, "execv: %s", strerror(errno));
	return 1;
}

static int v_inherited_child(void)
{
	hostile_recycle(64 * MiB, 6, 100);
	allocate_inside();
	hostile_recycle(64 * MiB, 6, 100);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "eperm", v_eperm },
		{ "kill", v_kill },
		{ "inherited", v_inherited },
		{ "inherited_child", v_inherited_child },
		{ NULL, NULL },
	};
	return hostile_main(argc, argv, variants);
}
