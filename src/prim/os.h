/* What the running system is: one struct hz_os per process, filled on first
 * use, plus readers for the few facts that change while a program runs.
 *
 * Filled once (fixed for the process, or changed so rarely that re-reading
 * on every use would cost more than it could gain):
 *   page size        the kernel's, from the auxiliary vector: fixed.
 *   THP settings     administrator tunables; the allocator reads them once,
 *                    as backing.c always did: the library never changes them
 *                    and administrators rarely do while programs run. A
 *                    caller that must see a change reads them now with
 *                    hz_os_read_thp (exec remap, once per apply).
 *   hugetlb pools    which pool sizes the kernel has: set at boot (the sizes
 *                    its CPU supports). Their page counts change all the
 *                    time, so hz_os_pool_available reads them when asked.
 *   LLC size         the hardware's: fixed.
 *   kernel version   fixed.
 * Not here: PR_GET_THP_DISABLE (a program may set it at any time: backing.c
 * asks on each block) and the thread count (hz_prim_thread_count).
 *
 * Filling makes only prim reads (each can be made to fail in tests; a fact
 * that cannot be read gets the value documented at its field), never
 * allocates and takes no lock, so it may run inside malloc before main, in
 * a signal handler that interrupted a fill, or in a fork child. Every
 * /proc, /sys and /tmp path of the library is in os.c, and the cgroup ones
 * in os_cgroup.c. */
#ifndef HZ_PRIM_OS_H
#define HZ_PRIM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* /sys/kernel/mm/transparent_hugepage/enabled. */
enum hz_thp_mode {
	HZ_THP_UNREADABLE, /* no THP in this kernel, or the read failed */
	HZ_THP_NEVER,
	HZ_THP_MADVISE,
	HZ_THP_ALWAYS,
};

struct hz_os_thp {
	enum hz_thp_mode mode;
	/* The sizes MADV_HUGEPAGE memory may get folios of, in bytes, OR'd
	 * together (each is a power of two). From hugepages-<N>kB/enabled ("always", "madvise", or
	 * "inherit" with mode on); without those files (before Linux 6.8,
	 * mTHP) only the PMD size, when mode is on. */
	uint64_t sizes;
	bool per_size; /* some hugepages-<N>kB/enabled was readable (mTHP) */
};

enum hz_os_pool { HZ_OS_POOL_1G, HZ_OS_POOL_2M, HZ_OS_POOLS };

struct hz_os_pool_info {
	const char *dir;  /* its sysfs directory */
	size_t page_size; /* bytes */
	bool present;     /* the kernel has this pool (nr_hugepages readable) */
};

struct hz_os {
	size_t page_size;  /* AT_PAGESZ; 4096 if the auxiliary vector lacks it */
	size_t pmd_size;   /* what one page-table page maps: 2 MiB with 4 KiB pages */
	struct hz_os_thp thp;
	struct hz_os_pool_info pools[HZ_OS_POOLS];
	uint64_t llc_size; /* bytes; 0 when unknown */
	unsigned kernel_major, kernel_minor; /* 0.0 when uname failed */
	/* vm.overcommit_memory is 0 or 1: read-write private memory that is
	 * never touched costs nothing. false in mode 2 (its commit charge
	 * counts against CommitLimit) and when the file cannot be read. */
	bool overcommits;
};

/* The facts, filled on the first call. Never NULL; the struct never
 * changes afterwards (outside tests). */
const struct hz_os *hz_os(void);

/* Whether THP is on for MADV_HUGEPAGE memory ("always" or "madvise"). */
static inline bool hz_os_thp_on(enum hz_thp_mode mode)
{
	return mode == HZ_THP_MADVISE || mode == HZ_THP_ALWAYS;
}

/* Whether folios of bytes (a power of two) are enabled in t. */
static inline bool hz_os_thp_size_on(const struct hz_os_thp *t, size_t bytes)
{
	return bytes != 0 && (bytes & (bytes - 1)) == 0 && (t->sizes & bytes) != 0;
}

/* Read the THP settings now, for callers that must see an administrator's
 * change (hz_os()->thp is the copy from the first call). */
void hz_os_read_thp(struct hz_os_thp *out);

/* Free pages of a hugetlb pool that no mapping has reserved yet
 * (free_hugepages - resv_hugepages, never below 0), read now: other
 * processes take and return pages at any time. 0 for a pool the kernel
 * does not have or whose count cannot be read. */
uint64_t hz_os_pool_available(enum hz_os_pool pool);

/* ---- cgroups (os_cgroup.c) ----
 *
 * Containers limit memory and hugetlb pages per cgroup, and the kernel
 * enforces the limits at fault time: by reclaim, then the OOM killer
 * (memory), or by SIGBUS (hugetlb). These read the limits of the cgroup
 * the process is in, v1 or v2, and of every ancestor up to the mount: a
 * parent's limit binds its children. Reads are small files, no allocation,
 * no lock; each is a hz_prim_read_file or hz_prim_open_read (fault
 * injection reaches them as HZ_CALL_READ_FILE, HZ_CALL_OPEN, HZ_CALL_READ).
 * Limits change while programs run (an orchestrator resizes a pod), so the
 * callers read them again when it matters, and the cgroup is found again
 * from time to time (a process can be moved). */

#define HZ_OS_CGROUP_PATH 512

/* buf = a, b and c (c may be NULL) end to end: 0, or -ENAMETOOLONG when
 * that does not fit. Without snprintf, whose formatting takes kilobytes
 * of stack: the paths of /proc and cgroup files are built on the
 * program's thread, which may be on a signal handler's small stack. */
int hz_os_concat(char *buf, size_t size, const char *a, const char *b, const char *c);

/* Call fn on each line of path, without its newline, until it returns
 * true. Lines are read through a 1 KiB window on the stack (the
 * program's thread may be on a small signal stack): a longer line is
 * skipped whole (a cgroup mount's line of mountinfo is about 100 bytes,
 * 300 with a container runtime's path; overlay mounts list their layers).
 * 0, or the error of the open or of a read. */
typedef bool hz_os_line_fn(char *line, void *ctx);
int hz_os_each_line(const char *path, hz_os_line_fn *fn, void *ctx);

/* Where a controller's files are for this process. */
struct hz_os_cgroup {
	char dir[HZ_OS_CGROUP_PATH]; /* the process's cgroup directory */
	size_t top;                  /* strlen of its mount point: no level above */
	bool v2;                     /* a cgroup2 hierarchy, else v1 */
};

/* Find controller's ("memory", "hugetlb") cgroup of this process: the v1
 * hierarchy that has the controller, else the cgroup2 one, from
 * /proc/self/cgroup and /proc/self/mountinfo. 0, -ENOENT when neither is
 * mounted or the process is in none, or the error of a read. */
int hz_os_cgroup_find(const char *controller, struct hz_os_cgroup *cg);

/* How long its callers keep what hz_os_cgroup_find found: 1 s. A lookup
 * costs 150-300 us here; a process is moved to another cgroup rarely, and
 * a limit may be set on a cgroup that had none. */
#define HZ_OS_CGROUP_FIND_NS 1000000000ull

/* No limit: what the readers give for a cgroup without one. */
#define HZ_OS_UNLIMITED UINT64_MAX

struct hz_os_memcg {
	/* The lowest limit of the cgroup and its ancestors, bytes: v2
	 * memory.max and memory.high (above high the kernel throttles and
	 * reclaims hard), v1 memory.limit_in_bytes. HZ_OS_UNLIMITED if none. */
	uint64_t limit;
	/* What can still be charged before the first of those levels is at
	 * its limit: min of limit - (usage - inactive file pages), v2
	 * memory.current, v1 memory.usage_in_bytes. Inactive file pages are
	 * the page cache reclaim takes first, without killing anyone; active
	 * ones are not counted as free, so room errs low. HZ_OS_UNLIMITED when
	 * no level has a limit. */
	uint64_t room;
};

/* The memory cgroup's limit and room, read now. 0, or a negative errno
 * value (the cgroup's files could not be read: out is then unlimited). */
int hz_os_memcg_read(const struct hz_os_cgroup *cg, struct hz_os_memcg *out);

/* vm.overcommit_memory, read now: 0, 1 or 2 into *mode. 0 or a negative
 * errno value. */
int hz_os_overcommit_mode(uint64_t *mode);

/* The commit charge, read now: limit CommitLimit and room CommitLimit -
 * Committed_AS of /proc/meminfo, in bytes. It limits mappings only under
 * strict overcommit (hz_os_overcommit_mode 2): every cached block stays in
 * Committed_AS, and a mapping that would take it over the limit fails in
 * any process of the machine. 0, or a negative errno value (/proc hidden:
 * out is then unlimited). */
int hz_os_commit_read(struct hz_os_memcg *out);

/* Bytes of hugetlb pages of page_size (2 MiB, 1 GiB) the hugetlb cgroup
 * and its ancestors still allow, read now: the smaller of what is left
 * under the fault limit (v2 hugetlb.<size>.max, v1 .limit_in_bytes) and
 * under the reservation limit (.rsvd.max, .rsvd.limit_in_bytes).
 * HZ_OS_UNLIMITED when no level limits that size. 0 or a negative errno
 * value (*room then 0: nothing is known to be allowed). */
int hz_os_hugetlb_room(const struct hz_os_cgroup *cg, size_t page_size, uint64_t *room);

#ifdef HZ_OS_TESTING
/* Read /proc and /sys below root instead of /, for fixture trees ("" is
 * the real one); cgroup reads only. */
void hz_os_set_root(const char *root);

/* Fill the struct again, so a test sees a sysfs change (tests only: a
 * pointer from before the previous reload may be overwritten). */
void hz_os_reload(void);
#endif

#endif /* HZ_PRIM_OS_H */
