/* Linux system calls used by hugezero. See prim.h for the conventions. */
#include "prim.h"
#include "fault.h"
#include "raw.h"
#include "../sizes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* The kernel's answer as it gives it: the result or -errno, errno
 * untouched (raw.h). */
#define SYSCALL(...) HZ_RAW(__VA_ARGS__)

int hz_prim_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	int err = hz_prim_fault(HZ_CALL_WRITE, 0, len);

	if (err)
		return err;
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
	int err = hz_prim_fault(HZ_CALL_MMAP, flags, len);
	long ret;

	if (err)
		return err;
	ret = SYSCALL(SYS_mmap, addr, len, prot, flags, fd, off);
	if (hz_prim_raw_failed(ret))
		return (int)ret;
	*out = (void *)ret;
	return 0;
}

int hz_prim_munmap(void *addr, size_t len)
{
	int err = hz_prim_fault(HZ_CALL_MUNMAP, 0, len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_munmap, addr, len);
}

int hz_prim_mremap(void *old, size_t old_len, size_t new_len, int flags,
		   void *new_addr, void **out)
{
	int err = hz_prim_fault(HZ_CALL_MREMAP, flags, new_len);
	long ret;

	if (err)
		return err;
	ret = SYSCALL(SYS_mremap, old, old_len, new_len, flags, new_addr);
	if (hz_prim_raw_failed(ret))
		return (int)ret;
	*out = (void *)ret;
	return 0;
}

int hz_prim_madvise(void *addr, size_t len, int advice)
{
	int err = hz_prim_fault(HZ_CALL_MADVISE, advice, len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_madvise, addr, len, advice);
}

int hz_prim_mprotect(void *addr, size_t len, int prot)
{
	int err = hz_prim_fault(HZ_CALL_MPROTECT, prot, len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_mprotect, addr, len, prot);
}

int hz_prim_munlock(void *addr, size_t len)
{
	int err = hz_prim_fault(HZ_CALL_MUNLOCK, 0, len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_munlock, addr, len);
}

int hz_prim_mincore(void *addr, size_t len, unsigned char *vec)
{
	int err = hz_prim_fault(HZ_CALL_MINCORE, 0, len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_mincore, addr, len, vec);
}

int hz_prim_memory(uint64_t *ram, uint64_t *swap)
{
	struct sysinfo si;
	int ret = hz_prim_fault(HZ_CALL_SYSINFO, 0, 0);

	if (ret == 0)
		ret = (int)SYSCALL(SYS_sysinfo, &si);
	if (ret != 0)
		return ret;
	*ram = (uint64_t)si.totalram * si.mem_unit;
	*swap = (uint64_t)si.totalswap * si.mem_unit;
	return 0;
}

int hz_prim_lower_thread_priority(void)
{
	struct sched_param param = { 0 };
	long tid = SYSCALL(SYS_gettid);
	int err = hz_prim_fault(HZ_CALL_SCHED, 0, 0);

	if (err)
		return err;

	/* SCHED_IDLE runs only when a core would otherwise idle: the
	 * pre-zeroer then never competes with the program. */
	if (SYSCALL(SYS_sched_setscheduler, tid, SCHED_IDLE, &param) == 0)
		return 0;
	return (int)SYSCALL(SYS_setpriority, PRIO_PROCESS, tid, 19);
}

/* A kernel without CONFIG_ANON_VMA_NAME (or before 5.17) answers EINVAL
 * to every name: asked once, not at every block. */
static int anon_name_refused;

int hz_prim_name_mapping(void *addr, size_t len, const char *name)
{
	int err = hz_prim_fault(HZ_CALL_PRCTL, PR_SET_VMA_ANON_NAME, len);

	if (err)
		return err;
	if (__atomic_load_n(&anon_name_refused, __ATOMIC_RELAXED))
		return -EINVAL;
	err = (int)SYSCALL(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, len,
			   (unsigned long)name);
	if (err == -EINVAL)
		__atomic_store_n(&anon_name_refused, 1, __ATOMIC_RELAXED);
	return err;
}

int hz_prim_read_process(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	long n = SYSCALL(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL, 0UL);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EFAULT;
}

int hz_prim_thp_disable_flags(void)
{
	int err = hz_prim_fault(HZ_CALL_PRCTL, PR_GET_THP_DISABLE, 0);

	if (err)
		return err;
	return (int)SYSCALL(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0);
}

ssize_t hz_prim_read_file(const char *path, char *buf, size_t size)
{
	int err = hz_prim_fault(HZ_CALL_READ_FILE, 0, size);
	size_t used = 0;
	long fd, n = 0;

	if (err)
		return err;
	fd = SYSCALL(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
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
	int err = hz_prim_fault(HZ_CALL_OPEN, 0, 0);

	if (err)
		return err;
	return (int)SYSCALL(SYS_openat, AT_FDCWD, path,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
}

int hz_prim_close(int fd)
{
	int err = hz_prim_fault(HZ_CALL_CLOSE, 0, 0);

	if (err)
		return err;
	return (int)SYSCALL(SYS_close, fd);
}

int hz_prim_dup_cloexec(int fd, int min)
{
	int err = hz_prim_fault(HZ_CALL_DUP, 0, 0);

	if (err)
		return err;
	return (int)SYSCALL(SYS_fcntl, fd, F_DUPFD_CLOEXEC, min);
}

uint64_t hz_prim_address_space_limit(void)
{
	struct rlimit rl;

	if (hz_prim_fault(HZ_CALL_GETRLIMIT, 0, 0) != 0 ||
	    SYSCALL(SYS_getrlimit, RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return rl.rlim_cur;
}

uint64_t hz_prim_now_ns(void)
{
	struct timespec ts;

	/* clock_gettime goes through the vDSO: no system call, no symbol of
	 * ours. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * HZ_NS_PER_SEC + (uint64_t)ts.tv_nsec +
	       hz_prim_fault_clock_skew();
}

pid_t hz_prim_getpid(void)
{
	return (pid_t)SYSCALL(SYS_getpid);
}

size_t hz_prim_page_size(void)
{
	unsigned long page = getauxval(AT_PAGESZ);

	return page ? (size_t)page : HZ_SZ_4K;
}

/* ---- executable text (src/exec) ---- */
/* Headers for the additions below, kept with them so the block stays an
 * append-only change to this file. */
#include <sys/stat.h>
#include <sys/utsname.h>

int hz_prim_open_read(const char *path)
{
	int err = hz_prim_fault(HZ_CALL_OPEN, 0, 0);

	if (err)
		return err;
	return (int)SYSCALL(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

ssize_t hz_prim_read(int fd, void *buf, size_t len)
{
	long n = hz_prim_fault(HZ_CALL_READ, 0, len);

	if (n)
		return n;

	do
		n = SYSCALL(SYS_read, fd, buf, len);
	while (n == -EINTR);
	return n;
}

ssize_t hz_prim_pread(int fd, void *buf, size_t len, uint64_t off)
{
	long n = hz_prim_fault(HZ_CALL_READ, 0, len);

	if (n)
		return n;

	do
		n = SYSCALL(SYS_pread64, fd, buf, len, (off_t)off);
	while (n == -EINTR);
	return n;
}

/* fstat, with its injected failure (fault.h). */
static int stat_fd(int fd, struct stat *st)
{
	int ret = hz_prim_fault(HZ_CALL_FSTAT, 0, 0);

	return ret != 0 ? ret : (int)SYSCALL(SYS_fstat, fd, st);
}

int hz_prim_file_id(int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	int ret = stat_fd(fd, &st);

	if (ret != 0)
		return ret;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

bool hz_prim_file_is(int fd, uint64_t dev, uint64_t ino)
{
	uint64_t d, i;

	return fd >= 0 && hz_prim_file_id(fd, &d, &i) == 0 && d == dev && i == ino;
}

int hz_prim_file_size(int fd, uint64_t *size)
{
	struct stat st;
	int ret = stat_fd(fd, &st);

	if (ret != 0)
		return ret;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}

#ifndef SYS_cachestat
#define SYS_cachestat 451 /* the same number on x86_64 and arm64 */
#endif

int hz_prim_cachestat(int fd, uint64_t off, uint64_t len, uint64_t *cached)
{
	/* The kernel's struct cachestat_range and struct cachestat (6.5). */
	struct { uint64_t off, len; } range = { off, len };
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
			 nr_recently_evicted;
	} cs;
	int ret;

	/* len 0 means "to the end of the file" for cachestat: never ask it. */
	if (len == 0) {
		*cached = 0;
		return 0;
	}
	ret = hz_prim_fault(HZ_CALL_CACHESTAT, 0, (size_t)len);
	if (ret == 0)
		ret = (int)SYSCALL(SYS_cachestat, fd, &range, &cs, 0);
	if (ret != 0)
		return ret;
	*cached = cs.nr_cache * (uint64_t)hz_prim_page_size();
	return 0;
}

int hz_prim_fadvise(int fd, uint64_t off, uint64_t len, int advice)
{
	int err = hz_prim_fault(HZ_CALL_FADVISE, advice, (size_t)len);

	if (err)
		return err;
	return (int)SYSCALL(SYS_fadvise64, fd, (off_t)off, (off_t)len, advice);
}

int hz_prim_kernel_version(unsigned *major, unsigned *minor)
{
	struct utsname u;
	char *end;
	int ret = hz_prim_fault(HZ_CALL_UNAME, 0, 0);
	int saved = errno;

	if (ret == 0)
		ret = (int)SYSCALL(SYS_uname, &u);
	if (ret != 0)
		return ret;
	*major = (unsigned)strtoul(u.release, &end, 10);
	*minor = *end == '.' ? (unsigned)strtoul(end + 1, NULL, 10) : 0;
	errno = saved;
	return 0;
}

int hz_prim_open_append(const char *path)
{
	struct stat st;
	long fd = hz_prim_fault(HZ_CALL_OPEN, 0, 0);

	if (fd == 0)
		fd = SYSCALL(SYS_openat, AT_FDCWD, path,
			     O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return (int)fd;
	if (SYSCALL(SYS_fstat, (int)fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != (uid_t)SYSCALL(SYS_geteuid)) {
		SYSCALL(SYS_close, (int)fd);
		return -EPERM;
	}
	return (int)fd;
}

int hz_prim_move_mapping(void *old, size_t len, void *new_addr)
{
	long flags = MREMAP_MAYMOVE | MREMAP_FIXED;
	long ret = hz_prim_fault(HZ_CALL_MREMAP, flags, len);

	if (ret)
		return (int)ret;
	/* Inline (raw.h): no call out of this object while its text moves. */
	ret = SYSCALL(SYS_mremap, old, len, len, flags, new_addr);
	if (hz_prim_raw_failed(ret))
		return (int)ret;
	return ret == (long)new_addr ? 0 : -EFAULT;
}

/* A raw system call, not nanosleep(3): the C library's is a cancellation
 * point, and a thread cancelled inside calloc must not be. */
void hz_prim_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / HZ_NS_PER_SEC), (long)(ns % HZ_NS_PER_SEC) };

	(void)SYSCALL(SYS_nanosleep, &ts, NULL);
}
