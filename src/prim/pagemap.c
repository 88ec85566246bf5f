/* PAGEMAP_SCAN on the process's own pagemap, and the fd it needs. See
 * hz_prim_pagemap_scan in pagemap.h.
 *
 * The fd lives inside a host program, which may close every fd (daemons),
 * dup2 over any number, fork, exec, unshare or chroot (no /proc), or
 * forbid the ioctl (seccomp). So:
 *  - it is opened O_CLOEXEC (exec drops it), moved to 100 or above, and
 *    once, not per scan (an open costs several scans); where the limit on
 *    open files forbids the move, it is closed again at once and mincore
 *    serves: a low number is one the program counts on;
 *  - before each use fstat must find the very file we opened (device and
 *    inode) at its number, else the number is the program's now: it is
 *    forgotten, never used or closed, and a new fd opened;
 *  - its record is in a MADV_WIPEONFORK page (a page of .bss, so no
 *    mapping of our own), so a child of fork, whose copy of the fd reads
 *    the parent's memory, finds none and opens its own; the copy it
 *    inherited is closed when fstat still finds our file there. Where the
 *    page cannot be wiped on fork, the record holds the pid it was made
 *    in instead, and pid 1 (a child in a new pid namespace can have the
 *    parent's pid) never uses an fd;
 *  - any failure falls back to mincore (the caller's), and a kernel
 *    without the ioctl, or a program that keeps taking our number, turns
 *    the scan off for the process;
 *  - no thread ever waits: whoever finds the record being replaced by
 *    another thread uses mincore for that call;
 *  - the pre-zero thread has a file table of its own
 *    (hz_prim_files_unshare): its fd is in a second record, used by it
 *    alone and begun anew with each new table. */
#include "pagemap.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault.h"
#include "prim.h"
#include "raw.h"
#include "../sizes.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* Linux 4.14 */
#endif

/* A program that took our number this often keeps doing it: stop. */
#define MAX_REPLACED 8
#define RETRY_NS HZ_NS_PER_SEC
/* 100 and up, as the report's fd: out of the way of programs that expect
 * low numbers free. */
#define FD_MIN 100

struct record {
	int live;       /* set up in this process (0 in a child of fork) */
	int fd;         /* ours + 1; 0: none */
	uint64_t dev, ino;
	int busy;       /* a thread is replacing the fd */
	int replaced;   /* times the number was found taken */
	int off;        /* scans are off for the process */
	pid_t pid;      /* made in (without MADV_WIPEONFORK) */
	uint64_t retry_after; /* an open failed: not again before this */
};

enum { UNSET, WIPED, BY_PID };
static union {
	struct record r;
	char page[HZ_SZ_4K];
} page __attribute__((aligned(HZ_SZ_4K)));
static int fork_check;          /* UNSET, WIPED or BY_PID */
static struct record inherited; /* the last fd opened, for a child to close */
/* The thread with a file table of its own, and which table that was. */
static struct record private_record;
static unsigned private_table;

static bool is_ours(int fd, uint64_t dev, uint64_t ino)
{
	return hz_prim_file_is(fd, dev, ino);
}

/* The caller's record: the private one in the thread with a table of its
 * own (a fork's child has no such thread: its copy is never used). */
static struct record *record_page(void)
{
	unsigned table = hz_prim_files_private();
	int how = __atomic_load_n(&fork_check, __ATOMIC_ACQUIRE);

	if (table != 0) {
		if (private_table != table) {
			memset(&private_record, 0, sizeof(private_record));
			private_record.live = 1; /* nothing inherited to close */
			private_table = table;
		}
		return &private_record;
	}
	if (how == UNSET) {
		/* Racing first callers advise twice; they find the same. */
		how = hz_prim_madvise(&page, sizeof(page), MADV_WIPEONFORK) == 0 ? WIPED : BY_PID;
		__atomic_store_n(&fork_check, how, __ATOMIC_RELEASE);
	}
	if (how == BY_PID) {
		pid_t pid = hz_prim_getpid();

		if (pid == 1)
			return NULL;
		if (__atomic_load_n(&page.r.pid, __ATOMIC_RELAXED) != pid) {
			__atomic_store_n(&page.r.live, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&page.r.pid, pid, __ATOMIC_RELAXED);
		}
	}
	return &page.r;
}

/* A child of fork: its inherited fd reads the parent's memory. Closed
 * when it is still our file at its number. */
static void close_inherited(void)
{
	int fd = __atomic_load_n(&inherited.fd, __ATOMIC_RELAXED) - 1;

	if (fd >= 0 && is_ours(fd, inherited.dev, inherited.ino))
		hz_prim_close(fd);
	__atomic_store_n(&inherited.fd, 0, __ATOMIC_RELAXED);
}

/* Under r->busy: open a new fd and publish it. */
static void open_fd(struct record *r)
{
	uint64_t dev, ino, now = hz_prim_now_ns();
	int fd, high;

	if (now < r->retry_after)
		return;
	fd = hz_prim_open_pagemap(0);
	if (fd < 0) {
		r->retry_after = now + RETRY_NS;
		return;
	}
	high = hz_prim_dup_cloexec(fd, FD_MIN);
	if (high >= 0) {
		hz_prim_close(fd);
		fd = high;
	} else if (r != &private_record) {
		/* The limit on open files is FD_MIN or less: a low number is
		 * one the program counts on (after close(0), its next open
		 * must be stdin), so none is kept; mincore serves. */
		hz_prim_close(fd);
		r->retry_after = now + RETRY_NS;
		return;
	}
	if (hz_prim_file_id(fd, &dev, &ino) != 0) {
		hz_prim_close(fd);
		r->retry_after = now + RETRY_NS;
		return;
	}
	__atomic_store_n(&r->dev, dev, __ATOMIC_RELAXED);
	__atomic_store_n(&r->ino, ino, __ATOMIC_RELAXED);
	if (r != &private_record) { /* a child's copy of the shared table has it */
		inherited.dev = dev;
		inherited.ino = ino;
		__atomic_store_n(&inherited.fd, fd + 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&r->fd, fd + 1, __ATOMIC_RELEASE);
}

/* Find the fd taken, or none: replace it, unless another thread is. */
static void renew(struct record *r, int seen)
{
	int idle = 0;

	if (!__atomic_compare_exchange_n(&r->busy, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&r->fd, __ATOMIC_RELAXED) == seen) {
		if (!__atomic_load_n(&r->live, __ATOMIC_RELAXED)) { /* new, or a child of fork */
			close_inherited();
			__atomic_store_n(&r->fd, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&r->live, 1, __ATOMIC_RELAXED);
		} else if (seen != 0) { /* the program's number now: forget, never close */
			__atomic_store_n(&r->fd, 0, __ATOMIC_RELAXED);
			if (++r->replaced >= MAX_REPLACED)
				__atomic_store_n(&r->off, 1, __ATOMIC_RELAXED);
		}
		if (!__atomic_load_n(&r->off, __ATOMIC_RELAXED))
			open_fd(r);
	}
	__atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
}

/* Our fd, checked, or -1. */
static int our_fd(struct record *r)
{
	for (int tries = 0; tries < 2; tries++) {
		int fd = __atomic_load_n(&r->fd, __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&r->off, __ATOMIC_RELAXED))
			return -1;
		if (fd != 0 && __atomic_load_n(&r->live, __ATOMIC_RELAXED) &&
		    is_ours(fd - 1, __atomic_load_n(&r->dev, __ATOMIC_RELAXED),
			    __atomic_load_n(&r->ino, __ATOMIC_RELAXED)) &&
		    __atomic_load_n(&r->fd, __ATOMIC_ACQUIRE) == fd)
			return fd - 1;
		renew(r, fd);
	}
	return -1;
}

static int scan_ioctl(int fd, struct hz_pm_scan_arg *arg)
{
	int ret = hz_prim_fault(HZ_CALL_PAGEMAP, 0, arg->end - arg->start);

	if (ret != 0)
		return ret;
	return (int)HZ_RAW(SYS_ioctl, fd, HZ_PAGEMAP_SCAN, arg);
}

int hz_prim_pagemap_scan(uintptr_t start, uintptr_t end, struct hz_prim_page_region *vec,
			 size_t n, uintptr_t *walk_end)
{
	struct record *r = record_page();
	struct hz_pm_scan_arg arg = {
		.size = sizeof(arg), .start = start, .end = end,
		.vec = (uintptr_t)vec, .vec_len = n,
		/* every page, mapped: a gap in the answer is a hole */
		.return_mask = HZ_PAGE_IS_PRESENT | HZ_PAGE_IS_SWAPPED | HZ_PAGE_IS_PFNZERO,
	};
	int fd, ret;

	if (r == NULL)
		return -ENOSYS;
	fd = our_fd(r);
	if (fd < 0)
		return -EBADF;
	/* Tools that model system calls (valgrind) know the argument the
	 * ioctl writes, not the vector it points to. */
	memset(vec, 0, n * sizeof(*vec));
	ret = scan_ioctl(fd, &arg);
	/* A number the program took between the check and the ioctl (a
	 * dup2 in another thread) answered for another file: not used. */
	if (!is_ours(fd, __atomic_load_n(&r->dev, __ATOMIC_RELAXED),
		     __atomic_load_n(&r->ino, __ATOMIC_RELAXED)))
		return -EBADF;
	/* Before Linux 6.7 (ENOTTY, EINVAL), or forbidden (EPERM, ENOSYS
	 * from seccomp): never again. */
	if (ret == -ENOTTY || ret == -EINVAL || ret == -EPERM || ret == -ENOSYS)
		__atomic_store_n(&r->off, 1, __ATOMIC_RELAXED);
	if (ret >= 0)
		*walk_end = arg.walk_end;
	return ret;
}

int hz_prim_pagemap_fd(void)
{
	return __atomic_load_n(&page.r.fd, __ATOMIC_ACQUIRE) - 1;
}
