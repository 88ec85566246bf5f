/* A program that sandboxes itself with seccomp after start-up (as
 * browsers' renderers, OpenSSH's privilege-separated child and many
 * servers do): from then on only the system calls its allocator and
 * output need are allowed (what glibc's malloc uses: mmap, munmap,
 * mremap, mprotect, madvise, brk, futex), every other call fails with
 * EPERM. Large allocations must keep working, zeroed where promised, and
 * nothing may be printed that the program did not print. */
#include "hostile.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static void sandbox(void)
{
#ifdef ARCH
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_close), ALLOW(SYS_fstat),
		ALLOW(SYS_newfstatat), ALLOW(SYS_lseek), ALLOW(SYS_mmap), ALLOW(SYS_munmap),
		ALLOW(SYS_mremap), ALLOW(SYS_mprotect), ALLOW(SYS_madvise), ALLOW(SYS_brk),
		ALLOW(SYS_futex), ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_rt_sigreturn),
		ALLOW(SYS_exit), ALLOW(SYS_exit_group), ALLOW(SYS_getpid), ALLOW(SYS_gettid),
		ALLOW(SYS_clock_gettime), ALLOW(SYS_clock_nanosleep), ALLOW(SYS_sched_yield),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS");
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		SKIP("seccomp filters are not allowed here: %s", strerror(errno));
#else
	SKIP("no seccomp architecture constant for this CPU");
#endif
}

int main(void)
{
	char *p, *q;

	/* Before the sandbox: the program's start-up, as usual. */
	hostile_use_new_block(8 * MiB, true);
	sandbox();
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
	return 0;
}
