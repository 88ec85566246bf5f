/* Changes of a thread's own security state: credentials, capabilities,
 * no_new_privs, seccomp filters, Landlock domains. Linux keeps each per
 * thread. glibc's setuid family changes every thread (it signals each to
 * make the same call), but a program that believes it has one thread
 * drops privileges by the calls that change only the caller: the set*id
 * calls by number, capset (libcap), prctl(PR_SET_NO_NEW_PRIVS,
 * PR_SET_SECCOMP, PR_CAPBSET_DROP, ...), seccomp without TSYNC
 * (libseccomp's default), landlock_restrict_self. The pre-zero thread
 * would keep what the program gave up: a root thread in a program that
 * runs as nobody. So it is stopped before each such call, and the next
 * one, started by a program thread after it, inherits the new state
 * (prezero_start.c). After a seccomp filter none starts again, and
 * hugezero steps aside (start.c): the filter may kill for calls that
 * glibc's malloc does not make. What
 * cannot be seen here (a system call made by an instruction of the
 * program's own) finds the thread confined to what it needs
 * (src/prim/confine.c). */
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "../prezero.h"
#include "preload.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
/* Linux 5.13 (the generic number, x86_64 and aarch64 alike). */
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

static bool prctl_changes_security(long option)
{
	switch (option) {
	case PR_SET_NO_NEW_PRIVS:
	case PR_SET_SECCOMP:
	case PR_CAPBSET_DROP:
	case PR_SET_SECUREBITS:
	case PR_SET_KEEPCAPS:
	case PR_CAP_AMBIENT:
		return true;
	default:
		return false;
	}
}

static bool changes_security(long nr, long first_arg)
{
	switch (nr) {
	case SYS_setuid:
	case SYS_setgid:
	case SYS_setreuid:
	case SYS_setregid:
	case SYS_setresuid:
	case SYS_setresgid:
	case SYS_setfsuid:
	case SYS_setfsgid:
	case SYS_setgroups:
	case SYS_capset:
	case SYS_seccomp:
	case SYS_landlock_restrict_self:
		return true;
	case SYS_prctl:
		return prctl_changes_security(first_arg);
	default:
		return false;
	}
}

/* A seccomp filter may kill the process for the calls a new thread makes
 * (clone3, sched_setscheduler, prctl, ...): after one, no thread starts. */
static bool installs_seccomp(long nr, long first_arg)
{
	return nr == SYS_seccomp || (nr == SYS_prctl && first_arg == PR_SET_SECCOMP);
}

HZ_PRIVATE_API void hz_preload_security_call(long nr, long first_arg)
{
	if (installs_seccomp(nr, first_arg))
		hz_preload_step_aside();
	else if (changes_security(nr, first_arg))
		hz_prezero_stop();
}
