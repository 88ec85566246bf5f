/* Linux system calls used by hugezero. See prim.h for the conventions. */
#include "prim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* Run a system call and turn its result into 0/-errno, keeping errno. */
static long checked(long ret, int saved_errno)
{
	if (ret == -1)
		ret = -errno;
	errno = saved_errno;
	return ret;
}

#define SYSCALL(...) checked(syscall(__VA_ARGS__), errno)

int hz_prim_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		long n = SYSCALL(SYS_write, fd, p, len);

		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? (int)n : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hz_prim_mmap(void *addr, size_t len, int prot, int flags, int fd,
		 off_t off, void **out)
{
	int saved = errno;
	long ret = syscall(SYS_mmap, addr, len, prot, flags, fd, off);

	/* syscall() returns -1 with errno set for every error; any other
	 * value is the address. */
	if (ret == -1)
		return (int)checked(ret, saved);
	errno = saved;
	*out = (void *)ret;
	return 0;
}

int hz_prim_munmap(void *addr, size_t len)
{
	return (int)SYSCALL(SYS_munmap, addr, len);
}

int hz_prim_mremap(void *old, size_t old_len, size_t new_len, int flags,
		   void *new_addr, void **out)
{
	int saved = errno;
	long ret = syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);

	if (ret == -1)
		return (int)checked(ret, saved);
	errno = saved;
	*out = (void *)ret;
	return 0;
}

int hz_prim_madvise(void *addr, size_t len, int advice)
{
	return (int)SYSCALL(SYS_madvise, addr, len, advice);
}

int hz_prim_mprotect(void *addr, size_t len, int prot)
{
	return (int)SYSCALL(SYS_mprotect, addr, len, prot);
}

int hz_prim_mincore(void *addr, size_t len, unsigned char *vec)
{
	return (int)SYSCALL(SYS_mincore, addr, len, vec);
}

int hz_prim_memory(uint64_t *ram, uint64_t *swap)
{
	struct sysinfo si;
	int ret = (int)SYSCALL(SYS_sysinfo, &si);

	if (ret != 0)
		return ret;
	*ram = (uint64_t)si.totalram * si.mem_unit;
	*swap = (uint64_t)si.totalswap * si.mem_unit;
	return 0;
}

int hz_prim_lower_thread_priority(void)
{
	struct sched_param param = { 0 };
	long tid = syscall(SYS_gettid);

	/* SCHED_IDLE runs only when a core would otherwise idle: the
	 * pre-zeroer then never competes with the program. */
	if (SYSCALL(SYS_sched_setscheduler, tid, SCHED_IDLE, &param) == 0)
		return 0;
	return (int)SYSCALL(SYS_setpriority, PRIO_PROCESS, tid, 19);
}

int hz_prim_name_mapping(void *addr, size_t len, const char *name)
{
	return (int)SYSCALL(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME,
			    (unsigned long)addr, len, (unsigned long)name);
}

ssize_t hz_prim_read_file(const char *path, char *buf, size_t size)
{
	long fd = SYSCALL(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	size_t used = 0;
	long n = 0;

	if (fd < 0)
		return fd;
	while (used + 1 < size) {
		n = SYSCALL(SYS_read, (int)fd, buf + used, size - 1 - used);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	SYSCALL(SYS_close, (int)fd);
	if (size > 0)
		buf[used] = '\0';
	return n < 0 ? n : (ssize_t)used;
}

int hz_prim_read_u64(const char *path, uint64_t *out)
{
	char buf[32], *end;
	ssize_t n = hz_prim_read_file(path, buf, sizeof(buf));
	unsigned long long v;
	int saved = errno;

	if (n < 0)
		return (int)n;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf) {
		errno = saved;
		return -EINVAL;
	}
	errno = saved;
	*out = v;
	return 0;
}

int hz_prim_create_file(const char *path)
{
	return (int)SYSCALL(SYS_openat, AT_FDCWD, path,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
}

int hz_prim_close(int fd)
{
	return (int)SYSCALL(SYS_close, fd);
}

int hz_prim_dup_cloexec(int fd, int min)
{
	return (int)SYSCALL(SYS_fcntl, fd, F_DUPFD_CLOEXEC, min);
}

uint64_t hz_prim_address_space_limit(void)
{
	struct rlimit rl;

	if (SYSCALL(SYS_getrlimit, RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return rl.rlim_cur;
}

uint64_t hz_prim_now_ns(void)
{
	struct timespec ts;

	/* clock_gettime goes through the vDSO: no system call, no symbol of
	 * ours. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

pid_t hz_prim_getpid(void)
{
	return (pid_t)syscall(SYS_getpid);
}
