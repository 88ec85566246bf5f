/* unshare and setns: a process must be single-threaded for some of them
 * (a new user namespace, joining a user or mount namespace: EINVAL
 * otherwise), and the pre-zero thread would make a single-threaded
 * program multi-threaded. So the thread is stopped first, and its task
 * released by the kernel (hz_prezero_stop waits for both: tgkill answers
 * ESRCH then, with or without /proc), so the kernel counts only the
 * program's threads; the next free of a dirty block starts it again
 * (prezero_start.c). Stopped for every call, whatever the flags: these
 * are rare, and which flags need a single thread differs between
 * kernels. */
#include <errno.h>

#include "../prezero.h"
#include "preload.h"

HZ_PRIVATE_API int hz_preload_unshare(int (*real)(int), int flags)
{
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	hz_prezero_stop();
	return real(flags);
}

HZ_PRIVATE_API int hz_preload_setns(int (*real)(int, int), int fd, int nstype)
{
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	hz_prezero_stop();
	return real(fd, nstype);
}
