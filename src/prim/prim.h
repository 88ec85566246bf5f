/* The system-call layer: the only code in hugezero that talks to the kernel
 * (system calls, /proc and /sys). Everything above calls these, so a test can
 * make any of them fail and a port needs to touch one folder.
 *
 * System calls are made with the system-call instruction itself (raw.h),
 * never through the C library's wrappers nor its syscall(), because the
 * preload interposes mmap and friends and syscall() as well: our own calls
 * must never come back into our own symbols.
 *
 * Functions return 0 (or a count) on success and a negative errno value on
 * failure, and never change errno.
 *
 * memory.h builds the memory operations the library uses (reserve, commit,
 * decommit, map aligned, residency) on the raw mapping calls below; prefer
 * those to combining mmap, munmap and madvise by hand. */
#ifndef HZ_PRIM_H
#define HZ_PRIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all of buf to fd, retrying on EINTR and short writes. */
int hz_prim_write_all(int fd, const void *buf, size_t len);

int hz_prim_mmap(void *addr, size_t len, int prot, int flags, int fd,
		 off_t off, void **out);
int hz_prim_munmap(void *addr, size_t len);
int hz_prim_mremap(void *old, size_t old_len, size_t new_len, int flags,
		   void *new_addr, void **out);
int hz_prim_madvise(void *addr, size_t len, int advice);
int hz_prim_mprotect(void *addr, size_t len, int prot);
/* munlock: a range the program locked (mlock, mlockall) gives its lock up. */
int hz_prim_munlock(void *addr, size_t len);

/* Residency of the pages of [addr, addr + len) (4 KiB pages, page-aligned
 * addr), one byte per page in vec, bit 0 set when resident. */
int hz_prim_mincore(void *addr, size_t len, unsigned char *vec);

/* Total RAM and swap in bytes (sysinfo). */
int hz_prim_memory(uint64_t *ram, uint64_t *swap);

/* Lower the calling thread's priority: SCHED_IDLE where allowed, else
 * nice 19. Returns 0 or a negative errno value. */
int hz_prim_lower_thread_priority(void);

/* Name an anonymous mapping in /proc/PID/maps ("[anon:name]"); kernels
 * before 5.17 or without CONFIG_ANON_VMA_NAME return -EINVAL. */
int hz_prim_name_mapping(void *addr, size_t len, const char *name);

/* Copy len bytes at addr in process pid into buf with process_vm_readv:
 * the kernel's ptrace access check decides (the same user, not dumpable-
 * protected, or CAP_SYS_PTRACE). Returns 0, -ESRCH (no such process),
 * -EPERM, -EFAULT (not mapped there, or a short copy) or another negative
 * errno value. For the hugezero command; the library never calls it. */
int hz_prim_read_process(pid_t pid, uint64_t addr, void *buf, size_t len);

/* The process's PR_GET_THP_DISABLE value: 0; 1 when THP is disabled for
 * every mapping (prctl(PR_SET_THP_DISABLE), inherited across fork and
 * exec); 3 when disabled except for MADV_HUGEPAGE regions (Linux 6.18's
 * PR_THP_DISABLE_EXCEPT_ADVISED). Or a negative errno value. */
int hz_prim_thp_disable_flags(void);

/* Read up to size - 1 bytes of a small /proc or /sys file into buf,
 * NUL-terminated. Returns the length or a negative errno value. */
ssize_t hz_prim_read_file(const char *path, char *buf, size_t size);

/* Read a /proc or /sys file holding one unsigned number. */
int hz_prim_read_u64(const char *path, uint64_t *out);

/* Create a new file for writing: O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
 * mode 0600. Returns the fd or a negative errno value. */
int hz_prim_create_file(const char *path);
int hz_prim_close(int fd);

/* A close-on-exec duplicate of fd numbered min or above, or -errno. */
int hz_prim_dup_cloexec(int fd, int min);

/* RLIMIT_AS soft limit, or UINT64_MAX when unlimited. */
uint64_t hz_prim_address_space_limit(void);

/* Bytes of address space the process maps now (VmSize). */
int hz_prim_address_space_used(uint64_t *bytes);

/* Bytes of the process's memory resident now (/proc/self/statm), or
 * -errno: /proc hidden. */
int hz_prim_resident(uint64_t *bytes);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t hz_prim_now_ns(void);

/* CPU time the calling thread has used, in ns (0 when unreadable): what a
 * collapse cost, without the time the scheduler gave other threads. */
uint64_t hz_prim_thread_cpu_ns(void);

/* CPU time every thread of the process has used, in ns (0 when
 * unreadable): what the promoter's share is measured against. */
uint64_t hz_prim_process_cpu_ns(void);

/* Minor faults the calling thread has taken so far (UINT64_MAX when
 * unreadable). MADV_POPULATE_WRITE counts the faults it makes there (a
 * huge page's as one), so a populate that faulted nothing shows: the
 * range was faulted in already, by another thread meanwhile. */
uint64_t hz_prim_thread_minor_faults(void);

/* Sleep about ns nanoseconds (less if a signal arrives). Never a
 * cancellation point. */
void hz_prim_sleep_ns(uint64_t ns);

pid_t hz_prim_getpid(void);

/* The kernel's page size (AT_PAGESZ; 4096 if the auxiliary vector lacks
 * it): a read of memory, no system call. Every preloaded process asks at
 * start-up (exec text), where hz_os's fill, with its dozen sysfs reads,
 * would cost about half a millisecond. */
size_t hz_prim_page_size(void);

/* Size in bytes of the CPU's last-level cache (sysfs cpu0, highest cache
 * index), or 0 when unknown: hz_os()->llc_size (os.h). */
uint64_t hz_prim_llc_size(void);

/* ---- executable text (src/exec) ---- */

/* Open a file read-only (O_RDONLY | O_CLOEXEC). Returns the fd or a
 * negative errno value. */
int hz_prim_open_read(const char *path);

/* Open /proc/PID/maps (or smaps) and /proc/PID/pagemap read-only; pid 0
 * is the calling process. (These and the other /proc, /sys and /tmp paths
 * are in os.c.) */
int hz_prim_open_maps(pid_t pid, bool smaps);
int hz_prim_open_pagemap(pid_t pid);

/* The state letter of process pid ("R", "S", "Z" for a zombie... of
 * /proc/PID/stat). Returns 0, -ESRCH when there is no such process, or
 * another negative errno value. For the hugezero command. */
int hz_prim_process_state(pid_t pid, char *state);

/* Whether the process's main thread has exited (pthread_exit, the exit
 * system call, or killed alone, as seccomp kills a thread) and the caller
 * is the one thread left: 1 with how it ended in *status, as waitpid
 * reports it (WIFSIGNALED, WEXITSTATUS), 0 when not, or a negative errno
 * value (no /proc). For the pre-zero thread, which must not keep a
 * process alive that its threads have left. */
int hz_prim_main_thread_left(int *status);

/* The command name of process pid (/proc/PID/comm, without its newline),
 * cut to size - 1 bytes. Returns 0 or a negative errno value. */
int hz_prim_process_name(pid_t pid, char *name, size_t size);

/* Call fn for the pid of every process in /proc, in directory order, until
 * it returns non-zero; returns that, 0 at the end, or a negative errno
 * value when /proc cannot be listed. Allocates (opendir): for the hugezero
 * command, never inside a host program. */
int hz_prim_each_process(int (*fn)(pid_t pid, void *arg), void *arg);

/* Open /proc/kpageflags (root only: 0400). */
int hz_prim_open_kpageflags(void);

/* A path that opens the calling process's own executable file
 * (/proc/self/exe). */
const char *hz_prim_self_exe_path(void);

/* read(2) and pread(2), retrying on EINTR. Return the byte count (0 at end
 * of file) or a negative errno value. */
ssize_t hz_prim_read(int fd, void *buf, size_t len);
ssize_t hz_prim_pread(int fd, void *buf, size_t len, uint64_t off);

/* The device and inode of the file open as fd (fstat), to tell later
 * whether a number still holds that file or the program's now. */
int hz_prim_file_id(int fd, uint64_t *dev, uint64_t *ino);
/* Whether fd holds the file of that device and inode. */
bool hz_prim_file_is(int fd, uint64_t dev, uint64_t ino);

/* Size of the regular file open as fd (fstat). */
int hz_prim_file_size(int fd, uint64_t *size);

/* Bytes of [off, off + len) of fd's file in the page cache, from
 * cachestat(2) (Linux 6.5; -ENOSYS before). */
int hz_prim_cachestat(int fd, uint64_t off, uint64_t len, uint64_t *cached);

/* posix_fadvise(2) as a system call (fadvise64). */
int hz_prim_fadvise(int fd, uint64_t off, uint64_t len, int advice);

/* Release "major.minor" of the running kernel (uname(2)). */
int hz_prim_kernel_version(unsigned *major, unsigned *minor);

/* Threads of the calling process ("Threads:" of /proc/self/status). */
int hz_prim_thread_count(unsigned *count);

/* Whether len more bytes of private writable memory stay within
 * RLIMIT_DATA (VmData: of /proc/self/status against the limit; true
 * without a limit, false when the use cannot be read). */
bool hz_prim_data_fits(size_t len);

/* Whether RLIMIT_DATA has a soft limit (or cannot be read), read now. */
bool hz_prim_data_limited(void);

/* The calling thread's seccomp mode ("Seccomp:" of /proc/self/status: 0
 * none, 1 strict, 2 filter). Opens, reads and closes a file: calls the
 * dynamic loader made before the program could run. */
int hz_prim_seccomp_mode(unsigned *mode);

/* Open path for appending, creating it mode 0644 if absent, never through a
 * symlink; refused (-EPERM) unless it is a regular file owned by the
 * effective user. For /tmp/perf-PID.map, which other writers (JITs) share. */
int hz_prim_open_append(const char *path);

/* The calling process's perf map, /tmp/perf-PID.map, opened as
 * hz_prim_open_append does. */
int hz_prim_open_perfmap(void);

/* Move [old, old + len) over [new_addr, new_addr + len):
 * mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, new_addr). The
 * system-call instruction is inline here, in libhugezero.so, as for every
 * call of prim (raw.h): this call may replace the C library's own text, and
 * the code making the move must not be inside what it moves. */
int hz_prim_move_mapping(void *old, size_t len, void *new_addr);

/* ---- threads (thread.c) ---- */

/* Start fn(arg) on a new detached thread with every signal blocked (they
 * belong to the program) and a stack of stack_size bytes (0: the C
 * library's default). The caller's signal mask is unchanged. Returns 0 or
 * a negative errno value: -EINTR, to try later, from a signal handler on
 * its alternate stack (pthread_create and the dynamic linker it calls need
 * more stack than the 8 KiB such stacks often have). The only place
 * hugezero creates a thread. */
int hz_prim_thread_start(void *(*fn)(void *), void *arg, size_t stack_size);

/* The pthread_create hz_prim_thread_start calls, handed in from above:
 * prim names none itself, because in a process that preloads the
 * interposer the name is the interposer's own export. The interposer's
 * start uses the C library's (the next one); libhugezero.so's constructor
 * (library.c) offers the name as linked, which counts only while nothing
 * was handed in. Until either: no thread (-ENOSYS), and callers do the
 * work themselves. */
typedef int hz_prim_pthread_create_fn(pthread_t *, const pthread_attr_t *,
				      void *(*)(void *), void *);
void hz_prim_use_pthread_create(hz_prim_pthread_create_fn *create);
void hz_prim_offer_pthread_create(hz_prim_pthread_create_fn *create);

/* What hz_prim_confine_thread achieved: a bit per layer. */
#define HZ_CONFINED_NO_NEW_PRIVS 1u
#define HZ_CONFINED_CAPABILITIES 2u
#define HZ_CONFINED_LANDLOCK 4u
#define HZ_CONFINED_SECCOMP 8u
#define HZ_CONFINED_ALL 15u

/* Confine the calling thread for good to what the pre-zero thread needs
 * (confine.c says what and why): no_new_privs, no capability but
 * CAP_SETUID and CAP_SETGID, reads below /proc/self and /sys only
 * (Landlock), and a seccomp filter answering EPERM to every call it does
 * not make. Returns the HZ_CONFINED_* bits of the layers in place; one
 * that the kernel or a sandbox refuses is left out, the others stand.
 * errno is unchanged. */
unsigned hz_prim_confine_thread(void);

/* The calling thread's kernel id (gettid). */
int hz_prim_gettid(void);

/* End the calling thread with the exit system call: none of the C
 * library's thread exit runs. The last thread's status is the process's. */
__attribute__((noreturn)) void hz_prim_exit_thread(int status);

/* End the process with SIGKILL, from any thread (tgkill to itself). */
__attribute__((noreturn)) void hz_prim_kill_process(void);

/* Whether the kernel still knows thread tid of this process: false once
 * it has released the task, which then counts no more towards
 * RLIMIT_NPROC or a pids cgroup (tgkill with signal 0: ESRCH), and where
 * it will not say (a program's filter refusing tgkill): no caller waits
 * on what it cannot see. errno is unchanged. */
bool hz_prim_thread_known(int tid);

/* Whether the C library still takes the process for single-threaded
 * (glibc's __libc_single_threaded: false from the first pthread_create on,
 * for good). */
bool hz_prim_single_threaded(void);

/* Give the calling thread a file table of its own, holding none of the
 * program's files but stderr when keep_stderr (for its messages). The
 * kernel takes a lock and two atomic counts on every read, write and lseek
 * of a process whose file table is shared by two threads, and skips them
 * when one thread has it: with this, a program whose only other thread is
 * ours keeps that single-threaded path (ld: 2.2 million file calls, 0.3 s
 * of system time). Files the thread opens afterwards are its own: the
 * program never sees their numbers. Returns 0, or a negative errno value
 * (before Linux 5.9, or under a seccomp filter) with the table still
 * shared. */
int hz_prim_files_unshare(bool keep_stderr);

/* 0, unless the caller is the thread that last called
 * hz_prim_files_unshare: then how many times a thread did (fds cached for
 * the shared table are not valid in it, and its own are valid nowhere
 * else). */
unsigned hz_prim_files_private(void);

/* Sleep while *word == expected, at most timeout_ns (0: no limit), or
 * until hz_prim_futex_wake on word (a private futex). Returns 0 when
 * woken, -EAGAIN when *word was not expected, -ETIMEDOUT or -EINTR. */
int hz_prim_futex_wait(int *word, int expected, uint64_t timeout_ns);

/* Wake up to count threads sleeping in hz_prim_futex_wait on word.
 * Returns how many were woken, or a negative errno value. */
int hz_prim_futex_wake(int *word, int count);

#endif /* HZ_PRIM_H */
