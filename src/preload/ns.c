/* unshare and setns: a process must be single-threaded for some of them
 * (a new user namespace, joining a user or mount namespace: EINVAL
 * otherwise), and the pre-zero thread would make a single-threaded
 * program multi-threaded. So the thread is stopped first, and the kernel
 * then counts only the program's threads; the next free of a dirty block
 * starts it again (prezero_start.c). Stopped for every call, whatever the
 * flags: these are rare, and which flags need a single thread differs
 * between kernels.
 *
 * A stopped thread has left its loop, but the kernel counts it a few
 * microseconds longer, until the C library's thread exit is done; the
 * call answers EINVAL meanwhile. Nothing outside the kernel tells when it
 * is done (/proc/self/task may be hidden, as in hardened containers, and
 * pthread_join returns before it), so the call itself is asked again,
 * every 20 us for at most a second, and only right after a thread was
 * stopped: a program's own EINVAL costs that second at most once. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "../prezero.h"
#include "../prim/prim.h"
#include "../sizes.h"
#include "preload.h"

#define LEAVE_WAIT_NS HZ_NS_PER_SEC
#define LEAVE_POLL_NS 20000u

/* Whether to make the call again: it failed with EINVAL while a thread
 * that was just stopped may still be counted. */
static bool again(int stopped, int ret, uint64_t deadline)
{
	if (stopped != 1 || ret == 0 || errno != EINVAL || hz_prim_now_ns() >= deadline)
		return false;
	hz_prim_sleep_ns(LEAVE_POLL_NS);
	return true;
}

HZ_PRIVATE_API int hz_preload_unshare(int (*real)(int), int flags)
{
	uint64_t deadline;
	int stopped, ret;

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	stopped = hz_prezero_stop();
	deadline = hz_prim_now_ns() + LEAVE_WAIT_NS;
	do
		ret = real(flags);
	while (again(stopped, ret, deadline));
	return ret;
}

HZ_PRIVATE_API int hz_preload_setns(int (*real)(int, int), int fd, int nstype)
{
	uint64_t deadline;
	int stopped, ret;

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	stopped = hz_prezero_stop();
	deadline = hz_prim_now_ns() + LEAVE_WAIT_NS;
	do
		ret = real(fd, nstype);
	while (again(stopped, ret, deadline));
	return ret;
}
