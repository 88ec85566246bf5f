/* Locked memory under RLIMIT_MEMLOCK, as an unprivileged user (as root,
 * the case drops to nobody in a child first: root is not limited). glibc's
 * free unmaps a large block and its lock with it, and its address space is
 * only what it uses, so mlockall fits a small limit. */
#include "hostile.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* In a child: the limit, then no privileges. */
static pid_t limited_child(rlim_t limit)
{
	struct rlimit rl;
	pid_t pid;

	CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	/* Raising the hard limit takes CAP_SYS_RESOURCE, which containers
	 * often drop even for root. */
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < limit)
		SKIP("RLIMIT_MEMLOCK's hard limit is below %llu bytes", (unsigned long long)limit);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid != 0)
		return pid;
	rl.rlim_cur = rl.rlim_max = limit;
	CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit: %s", strerror(errno));
	hostile_drop_root();
	return 0;
}

static void locked_bytes_are(long long want)
{
	long long have = hostile_status_bytes("VmLck:");

	CHECK(have == want, "VmLck is %lld bytes, not %lld", have, want);
}

/* Lock, use and free blocks of growing sizes (growing: glibc raises its
 * mmap threshold at each free, and smaller blocks would come from its
 * heap, where free keeps pages and locks) under an 8 MiB limit. */
static int cycles(void)
{
	pid_t pid = limited_child(8 * MiB);

	if (pid != 0)
		return hostile_wait(pid);
	for (size_t mib = 2; mib <= 7; mib++) {
		size_t len = mib * MiB;
		char *p = malloc(len);

		CHECK(p != NULL, "malloc(%zu MiB)", mib);
		CHECK(mlock(p, len) == 0, "mlock of the %zu MiB block: %s", mib, strerror(errno));
		hz_test_fill(p, len, (unsigned)mib);
		free(p);
	}
	locked_bytes_are(0);
	hostile_use_new_block(6 * MiB, true);
	exit(0);
}

/* The same with mlock2(MLOCK_ONFAULT) (lock what is touched, as a
 * database locks its buffer pool), through the wrapper and by number in
 * turn: each counts against the limit as it faults. */
static int onfault_cycles(void)
{
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
	pid_t pid = limited_child(8 * MiB);

	if (pid != 0)
		return hostile_wait(pid);
	for (size_t mib = 2; mib <= 7; mib++) {
		size_t len = mib * MiB;
		char *p = malloc(len);
		int ret;

		CHECK(p != NULL, "malloc(%zu MiB)", mib);
		ret = mib % 2 ? (int)syscall(SYS_mlock2, p, len, MLOCK_ONFAULT)
			      : mlock2(p, len, MLOCK_ONFAULT);
		if (ret != 0 && errno == ENOSYS)
			SKIP("mlock2 is not available here");
		CHECK(ret == 0, "mlock2(MLOCK_ONFAULT) of the %zu MiB block: %s", mib,
		      strerror(errno));
		hz_test_fill(p, len, (unsigned)mib);
		free(p);
	}
	locked_bytes_are(0);
	hostile_use_new_block(6 * MiB, true);
	exit(0);
}

/* mlockall(MCL_CURRENT) is refused when the address space is larger than
 * the limit (the kernel compares its whole size, mapped or not); this
 * program's is about 3 MiB under glibc. */
static int all_current(void)
{
	pid_t pid = limited_child(8 * MiB);

	if (pid != 0)
		return hostile_wait(pid);
	CHECK(mlockall(MCL_CURRENT) == 0, "mlockall(MCL_CURRENT) under 8 MiB: %s (VmSize %lld)",
	      strerror(errno), hostile_status_bytes("VmSize:"));
	hostile_use_new_block(4 * MiB, false);
	hostile_use_new_block(4 * MiB, true);
	CHECK(munlockall() == 0, "munlockall");
	exit(0);
}

/* mlockall(MCL_FUTURE) alone (no size check at the call): every new
 * mapping is locked, so freed blocks that stayed mapped would eat the
 * limit. Sizes grow, as above. */
static int all_future(void)
{
	pid_t pid = limited_child(8 * MiB);

	if (pid != 0)
		return hostile_wait(pid);
	CHECK(mlockall(MCL_FUTURE) == 0, "mlockall(MCL_FUTURE): %s", strerror(errno));
	for (size_t mib = 2; mib <= 7; mib++)
		hostile_use_new_block(mib * MiB, mib % 2);
	exit(0);
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "cycles", cycles },
		{ "onfault_cycles", onfault_cycles },
		{ "all_current", all_current },
		{ "all_future", all_future },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
