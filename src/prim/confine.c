/* The pre-zero thread confines itself (hz_prim_confine_thread, prim.h).
 *
 * Credentials, capabilities, no_new_privs, seccomp filters and Landlock
 * domains belong to each thread. The preload stops the thread before every
 * change of them it can see (src/preload/creds.c), and a thread started
 * afterwards inherits the new state from the thread that starts it. A
 * change it cannot see (an inline system call, a static runtime) would
 * leave the thread with more than the program kept, so the thread takes
 * the least it needs from its first moment:
 *  - no_new_privs, which seccomp and Landlock require of an unprivileged
 *    thread;
 *  - of its capabilities, only CAP_SETUID and CAP_SETGID, and only where
 *    it had them: glibc's setuid family makes the same call in every
 *    thread and aborts the process when one thread's call fails where
 *    another's succeeded, so the thread must be able to follow a drop;
 *  - a Landlock domain that reads only this process's /proc directory and
 *    /sys (its pagemap, mountinfo, cgroup and sysfs files), writes no file,
 *    and signals or connects to nothing outside it;
 *  - a seccomp filter that allows the calls the thread makes and answers
 *    EPERM to every other (EPERM, not a kill: a call that is missing here
 *    degrades as a refused call does, it never takes the program down).
 * Each layer is tried on its own: a kernel or a sandbox that refuses one
 * keeps the others. */
#include "prim.h"
#include "pagemap.h"
#include "raw.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* ---- Landlock (Linux 5.13; the generic numbers, the same on x86_64 and
 * aarch64; the ABI's constants, so that older headers build) ---- */
#define LL_CREATE_RULESET 444
#define LL_ADD_RULE 445
#define LL_RESTRICT_SELF 446
#define LL_CREATE_RULESET_VERSION 1u
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_READ_FILE (1ull << 2)
#define LL_FS_READ_DIR (1ull << 3)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* Every right the ABI knows is handled, so every one not granted below is
 * denied: 13 file rights in ABI 1, REFER in 2, TRUNCATE in 3, IOCTL_DEV in
 * 5; TCP bind and connect in 4; abstract sockets and signals in 6. */
static size_t ruleset_for(long abi, struct ll_ruleset_attr *attr)
{
	attr->handled_access_fs = (1ull << 13) - 1;
	if (abi >= 2)
		attr->handled_access_fs |= 1ull << 13;
	if (abi >= 3)
		attr->handled_access_fs |= 1ull << 14;
	if (abi >= 5)
		attr->handled_access_fs |= 1ull << 15;
	attr->handled_access_net = 3;
	attr->scoped = 3;
	if (abi >= 6)
		return sizeof(*attr);
	if (abi >= 4)
		return offsetof(struct ll_ruleset_attr, scoped);
	return offsetof(struct ll_ruleset_attr, handled_access_net);
}

/* Reading below path (a directory), or the one file path, is allowed; a
 * file's rule takes no directory right. A path that cannot be opened, such
 * as a /proc that is not mounted, is simply not granted. */
static void grant_read(int ruleset, const char *path, bool dir)
{
	struct ll_path_beneath_attr rule = {
		dir ? LL_FS_READ_FILE | LL_FS_READ_DIR : LL_FS_READ_FILE, -1
	};

	rule.parent_fd = (int)HZ_RAW(SYS_openat, AT_FDCWD, path,
				     O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
	if (rule.parent_fd < 0)
		return;
	(void)HZ_RAW(LL_ADD_RULE, ruleset, LL_RULE_PATH_BENEATH, &rule, 0);
	(void)HZ_RAW(SYS_close, rule.parent_fd);
}

static int landlock(void)
{
	struct ll_ruleset_attr attr;
	long abi = HZ_RAW(LL_CREATE_RULESET, NULL, 0, LL_CREATE_RULESET_VERSION);
	int ruleset, ret;

	if (abi < 0)
		return (int)abi;
	if (abi == 0) /* versions start at 1 */
		return -EOPNOTSUPP;
	ruleset = (int)HZ_RAW(LL_CREATE_RULESET, &attr, ruleset_for(abi, &attr), 0);
	if (ruleset < 0)
		return ruleset;
	/* /proc/self names this process's directory (/proc/PID): other
	 * processes' are not granted. */
	grant_read(ruleset, "/proc/self", true);
	grant_read(ruleset, "/sys", true);
	/* The commit charge under strict overcommit (os.h). */
	grant_read(ruleset, "/proc/meminfo", false);
	grant_read(ruleset, "/proc/sys/vm/overcommit_memory", false);
	ret = (int)HZ_RAW(LL_RESTRICT_SELF, ruleset, 0);
	(void)HZ_RAW(SYS_close, ruleset);
	return ret;
}

/* ---- capabilities ---- */

static int keep_only_setid_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	const uint32_t keep = (1u << CAP_SETUID) | (1u << CAP_SETGID);
	int ret = (int)HZ_RAW(SYS_capget, &hdr, data);

	if (ret != 0)
		return ret;
	for (int i = 0; i < 2; i++) {
		data[i].permitted &= i == 0 ? keep : 0;
		data[i].effective &= i == 0 ? keep : 0;
		data[i].inheritable = 0;
	}
	return (int)HZ_RAW(SYS_capset, &hdr, data);
}

/* ---- seccomp ---- */

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#endif

#if defined(FILTER_ARCH) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FILTER_MAX 160
#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ARG_LO(i) ((uint32_t)offsetof(struct seccomp_data, args) + 8u * (uint32_t)(i))
#define ARG_HI(i) (ARG_LO(i) + 4u)

struct filter {
	struct sock_filter ins[FILTER_MAX];
	unsigned short n;
};

static void emit(struct filter *f, struct sock_filter ins)
{
	if (f->n < FILTER_MAX)
		f->ins[f->n] = ins;
	f->n++; /* counted on: a filter that overflows is not installed */
}

static void ret(struct filter *f, uint32_t action)
{
	emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action));
}

static void load(struct filter *f, uint32_t offset)
{
	emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

static void jump_eq(struct filter *f, uint32_t value, uint8_t jt, uint8_t jf)
{
	emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, jt, jf));
}

/* The number is loaded: allow nr. */
static void allow(struct filter *f, long nr)
{
	jump_eq(f, (uint32_t)nr, 0, 1);
	ret(f, SECCOMP_RET_ALLOW);
}

/* The number is loaded: allow nr when argument arg is one of values[n]
 * (below 2^32), deny it otherwise. */
static void allow_when(struct filter *f, long nr, unsigned arg, const uint32_t *values,
		       uint8_t n)
{
	jump_eq(f, (uint32_t)nr, 0, (uint8_t)(n + 5));
	load(f, ARG_HI(arg));
	jump_eq(f, 0, 0, (uint8_t)(n + 1));
	load(f, ARG_LO(arg));
	for (uint8_t i = 0; i < n; i++)
		jump_eq(f, values[i], (uint8_t)(n - i), 0);
	ret(f, DENY);
	ret(f, SECCOMP_RET_ALLOW);
}

/* The calls the thread makes: hugezero's own (src/prim/), glibc's for a
 * thread's small allocations, its sleeps and its exit, the setuid family
 * that glibc broadcasts to every thread, and sigaltstack, which sanitizer
 * runtimes call when a thread ends (AddressSanitizer stops the process
 * when it fails: a program built with it uses libhugezero.so too). It
 * changes only the thread's own signal stack. And exit_group, which ends
 * the process from this thread when something in it is fatal: a
 * sanitizer's report (ThreadSanitizer's halt_on_error), abort's last
 * resort. Refused, ThreadSanitizer's Die called itself until the stack
 * ran out, and the process died of SIGSEGV without its report. It grants
 * little beyond tgkill of the thread's own process (below): the choice of
 * the status the process ends with. */
static const long allowed[] = {
	SYS_read, SYS_pread64, SYS_write, SYS_openat, SYS_close, SYS_fstat, SYS_lseek,
	SYS_fcntl, SYS_mmap, SYS_munmap, SYS_mremap, SYS_madvise, SYS_mincore, SYS_mprotect,
	SYS_munlock, SYS_brk, SYS_futex, SYS_nanosleep, SYS_clock_nanosleep, SYS_clock_gettime,
	SYS_gettimeofday, SYS_sched_yield, SYS_getcpu, SYS_gettid, SYS_getpid, SYS_getuid,
	SYS_geteuid, SYS_getgid, SYS_getegid, SYS_sysinfo, SYS_uname, SYS_exit, SYS_exit_group,
	SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_restart_syscall, SYS_sigaltstack, SYS_setuid,
	SYS_setgid, SYS_setreuid, SYS_setregid, SYS_setresuid, SYS_setresgid, SYS_setgroups,
	SYS_setfsuid, SYS_setfsgid, SYS_getrusage,
	451 /* cachestat, Linux 6.5 */,
#ifdef SYS_newfstatat
	SYS_newfstatat,
#endif
#ifdef SYS_fadvise64
	SYS_fadvise64,
#endif
#ifdef SYS_getrlimit
	SYS_getrlimit,
#endif
#ifdef SYS_rseq
	SYS_rseq,
#endif
};

static int seccomp_filter(void)
{
	static const uint32_t prctls[] = { PR_GET_THP_DISABLE, PR_SET_VMA, PR_GET_NO_NEW_PRIVS };
	static const uint32_t no_new_limit[] = { 0 };
	static const uint32_t ioctls[] = { HZ_PAGEMAP_SCAN };
	const uint32_t self[] = { (uint32_t)hz_prim_getpid() };
	struct filter f = { .n = 0 };
	struct sock_fprog prog;

	load(&f, offsetof(struct seccomp_data, arch));
	jump_eq(&f, FILTER_ARCH, 1, 0);
	ret(&f, DENY);
	load(&f, offsetof(struct seccomp_data, nr));
#ifdef __x86_64__
	/* x32 numbers reach the same calls with a bit set: none of ours. */
	emit(&f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
	ret(&f, DENY);
#endif
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		allow(&f, allowed[i]);
	allow_when(&f, SYS_ioctl, 1, ioctls, 1);
	/* Signals to its own process only (the thread and the signal are
	 * not checked): it sends itself SIGKILL when the main thread was
	 * killed alone (prezero_start.c, hz_pz_leave_if_alone). */
	allow_when(&f, SYS_tgkill, 0, self, 1);
	allow_when(&f, SYS_prctl, 0, prctls, 3);
	/* Reading a limit, never setting one. */
	allow_when(&f, SYS_prlimit64, 2, no_new_limit, 1);
	ret(&f, DENY);
	if (f.n > FILTER_MAX)
		return -E2BIG;
	prog.len = f.n;
	prog.filter = f.ins;
	return (int)HZ_RAW(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
#else
static int seccomp_filter(void)
{
	return -ENOSYS;
}
#endif

unsigned hz_prim_confine_thread(void)
{
	unsigned done = 0;

	if (HZ_RAW(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
		done |= HZ_CONFINED_NO_NEW_PRIVS;
	if (keep_only_setid_caps() == 0)
		done |= HZ_CONFINED_CAPABILITIES;
	/* Landlock and seccomp need no_new_privs (or CAP_SYS_ADMIN, gone). */
	if ((done & HZ_CONFINED_NO_NEW_PRIVS) && landlock() == 0)
		done |= HZ_CONFINED_LANDLOCK;
	if ((done & HZ_CONFINED_NO_NEW_PRIVS) && seccomp_filter() == 0)
		done |= HZ_CONFINED_SECCOMP;
	return done;
}
