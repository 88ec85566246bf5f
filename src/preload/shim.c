/* libhugezero-preload.so: the symbols that interpose the C library's, and
 * the lookup of the next allocator, which must happen here, once (see
 * shim_abi.h). A small request goes from here straight to the next
 * allocator; everything else is a call into libhugezero.so. */
/* mmap and mmap64 are both exported: keep <sys/mman.h> from renaming one
 * into the other (64-bit off_t either way on 64-bit targets). */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>

#include "../exec/dlopen.h"
#include "shim_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* Start-up has completed: set once, never cleared. One load and a branch
 * that is always taken the same way on every call, in place of the call
 * into the library that checked its own state. */
static int started;

/* The fast path's copy (shim_abi.h): closed until the library fills it.
 * 64-byte aligned: malloc's and free's fields share one cache line. */
static _Alignas(64) struct hz_shim_fast fast = { .small_below = 0, .boot_len = SIZE_MAX };

/* The versioned lookup of the same names (defined at the end of the file). */
static void resolve_versioned(struct hz_next *next);

static void resolve(struct hz_next *next)
{
	next->next_malloc = dlsym(RTLD_NEXT, "malloc");
	next->next_free = dlsym(RTLD_NEXT, "free");
	next->next_calloc = dlsym(RTLD_NEXT, "calloc");
	next->next_realloc = dlsym(RTLD_NEXT, "realloc");
	next->next_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	next->next_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	next->next_memalign = dlsym(RTLD_NEXT, "memalign");
	next->next_valloc = dlsym(RTLD_NEXT, "valloc");
	next->next_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	next->next_malloc_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
	next->next_mmap = dlsym(RTLD_NEXT, "mmap");
	next->next_munmap = dlsym(RTLD_NEXT, "munmap");
	next->next_mremap = dlsym(RTLD_NEXT, "mremap");
	resolve_versioned(next);
}

/* The first call of a thread before start-up completed. In the thread that
 * runs start-up, calls made meanwhile (dlsym allocates) return at once:
 * the library's table is still the bootstrap allocator, which serves them. */
static __attribute__((noinline, cold)) void start_up(void)
{
	struct hz_next found;

	switch (hz_preload_begin()) {
	case HZ_START_NESTED:
		return;
	case HZ_START_RESOLVE:
		resolve(&found);
		hz_preload_attach(&fast);
		hz_preload_start(&found);
		break;
	case HZ_START_DONE:
		break;
	}
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

static inline void ready(void)
{
	if (__builtin_expect(!__atomic_load_n(&started, __ATOMIC_ACQUIRE), 0))
		start_up();
}

/* ---- the malloc family ----
 * Each call is a compare and a tail call to the next allocator when the
 * request is small (and the pointer neither a block nor the bootstrap's);
 * anything else, and every call before start-up completed, goes to the
 * library through a cold function of its own, so the fast path keeps no
 * frame. */

static inline size_t below(void)
{
	return __atomic_load_n(&fast.small_below, __ATOMIC_ACQUIRE);
}

/* Whether p is the next allocator's (or NULL): neither in the bootstrap
 * arena nor in a region of blocks. A block's region is in the table before
 * its pointer reaches any thread, so a relaxed load sees it. */
static inline int foreign_pointer(const void *p)
{
	size_t boot_len = __atomic_load_n(&fast.boot_len, __ATOMIC_ACQUIRE);
	uintptr_t a = (uintptr_t)p, g = a >> HZ_SHIM_REGION_SHIFT;

	if (a - fast.boot_start < boot_len)
		return 0;
	/* Above the table (5-level paging): never a block's. */
	if (__builtin_expect(g >= HZ_SHIM_REGION_GIBS, 0))
		return 1;
	return __atomic_load_n(&fast.owned[g], __ATOMIC_RELAXED) == 0;
}

#define COLD __attribute__((noinline, cold))

static COLD void *slow_malloc(size_t size)
{
	ready();
	return hz_preload_malloc(size);
}

EXPORT void *malloc(size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return fast.next.next_malloc(size);
	return slow_malloc(size);
}

static COLD void slow_free(void *p)
{
	ready();
	hz_preload_free(p);
}

EXPORT void free(void *p)
{
	if (__builtin_expect(foreign_pointer(p), 1)) {
		fast.next.next_free(p);
		return;
	}
	slow_free(p);
}

static COLD void *slow_calloc(size_t n, size_t size)
{
	ready();
	return hz_preload_calloc(n, size);
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;

	if (__builtin_expect(!__builtin_mul_overflow(n, size, &total) && total < below(), 1))
		return fast.next.next_calloc(n, size);
	return slow_calloc(n, size);
}

/* Small on both sides: the next allocator's block stays its own. A block
 * that crosses the threshold either way is the library's to move. */
static COLD void *slow_realloc(void *p, size_t size)
{
	ready();
	return hz_preload_realloc(p, size);
}

static inline void *realloc_to(void *p, size_t size)
{
	if (__builtin_expect(size < below() && foreign_pointer(p), 1))
		return fast.next.next_realloc(p, size);
	return slow_realloc(p, size);
}

EXPORT void *realloc(void *p, size_t size)
{
	return realloc_to(p, size);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_to(p, total);
}

static COLD int slow_posix_memalign(void **out, size_t align, size_t size)
{
	ready();
	return hz_preload_posix_memalign(out, align, size);
}

/* A bad alignment is the library's to refuse (EINVAL), as before. */
EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (__builtin_expect(size < below() && align >= sizeof(void *) && (align & (align - 1)) == 0,
			     1))
		return fast.next.next_posix_memalign(out, align, size);
	return slow_posix_memalign(out, align, size);
}

static COLD void *slow_aligned_alloc(size_t align, size_t size)
{
	ready();
	return hz_preload_aligned_alloc(align, size);
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return fast.next.next_aligned_alloc(align, size);
	return slow_aligned_alloc(align, size);
}

static COLD void *slow_memalign(size_t align, size_t size)
{
	ready();
	return hz_preload_memalign(align, size);
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return fast.next.next_memalign(align, size);
	return slow_memalign(align, size);
}

static COLD void *slow_valloc(size_t size)
{
	ready();
	return hz_preload_valloc(size);
}

EXPORT void *valloc(size_t size)
{
	if (__builtin_expect(size < below(), 1))
		return fast.next.next_valloc(size);
	return slow_valloc(size);
}

static COLD void *slow_pvalloc(size_t size)
{
	ready();
	return hz_preload_pvalloc(size);
}

/* pvalloc asks for whole 4 KiB pages: small is what the rounded size is. */
#define PVALLOC_PAGE ((size_t)4096)

EXPORT void *pvalloc(size_t size)
{
	if (__builtin_expect(size <= SIZE_MAX - PVALLOC_PAGE &&
				     ((size + PVALLOC_PAGE - 1) & ~(PVALLOC_PAGE - 1)) < below(),
			     1))
		return fast.next.next_pvalloc(size);
	return slow_pvalloc(size);
}

static COLD size_t slow_malloc_usable_size(void *p)
{
	ready();
	return hz_preload_malloc_usable_size(p);
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (__builtin_expect(p != NULL && foreign_pointer(p), 1))
		return fast.next.next_malloc_usable_size(p);
	return slow_malloc_usable_size(p);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	ready();
	return hz_preload_mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	ready();
	return hz_preload_mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len)
{
	ready();
	return hz_preload_munmap(addr, len);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	va_list ap;

	va_start(ap, flags);
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP))
		new_addr = va_arg(ap, void *);
	va_end(ap);
	ready();
	return hz_preload_mremap(old, old_len, new_len, flags, new_addr);
}

/* dlopen: executable text on large folios (src/exec/dlopen.h). glibc's
 * dlopen takes its caller from its own return address and resolves
 * $ORIGIN, RUNPATH and the namespace against that object: so the exported
 * dlopen below is a jump, not a call. It saves the arguments, calls
 * hz_shim_dlopen_prepare (hugezero's part, done before the load), and
 * jumps to the real dlopen with the program's return address still on
 * the stack, which returns straight to the program. A C tail call would
 * do the same only when the compiler makes it one, which -O0 does not.
 * The mode is applied to the new objects later (dlopen.h). */
static void *(*real_dlopen)(const char *, int);

__attribute__((visibility("hidden"))) void *hz_shim_dlopen_prepare(const char *file, int flags);

static void *no_dlopen(const char *file, int flags)
{
	(void)file;
	(void)flags;
	return NULL;
}

void *hz_shim_dlopen_prepare(const char *file, int flags)
{
	void *(*fn)(const char *, int) = __atomic_load_n(&real_dlopen, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&real_dlopen, fn, __ATOMIC_RELAXED);
	}
	if (fn == NULL) /* no C library's dlopen after us: fail as a load would */
		return (void *)no_dlopen;
	hz_exec_dlopen_begin(file, flags);
	return (void *)fn;
}

/* endbr64 and bti c are hints, executed as no-ops where branch tracking
 * is off; the stack stays 16-byte aligned at the call. */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, @function\n"
	".p2align 4\n"
	"dlopen:\n"
	".cfi_startproc\n"
	"endbr64\n"
	"push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"push %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call hz_shim_dlopen_prepare\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"jmp *%rax\n"
	".cfi_endproc\n"
	".size dlopen, .-dlopen\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl dlopen\n"
	".type dlopen, %function\n"
	".p2align 4\n"
	"dlopen:\n"
	".cfi_startproc\n"
	"hint #34\n" /* bti c */
	"stp x29, x30, [sp, #-32]!\n"
	".cfi_def_cfa_offset 32\n"
	".cfi_offset 29, -32\n"
	".cfi_offset 30, -24\n"
	"mov x29, sp\n"
	"stp x0, x1, [sp, #16]\n"
	"bl hz_shim_dlopen_prepare\n"
	"mov x16, x0\n"
	"ldp x0, x1, [sp, #16]\n"
	"ldp x29, x30, [sp], #32\n"
	".cfi_restore 29\n"
	".cfi_restore 30\n"
	".cfi_def_cfa_offset 0\n"
	"br x16\n"
	".cfi_endproc\n"
	".size dlopen, .-dlopen\n");
#else
#error "the dlopen jump is written for x86_64 and aarch64"
#endif

/* Start before main so the reservation exists before threads do, and
 * report at exit. */
__attribute__((constructor)) static void preload_start(void)
{
	ready();
}

__attribute__((destructor)) static void preload_stop(void)
{
	hz_preload_exit();
}

/* ---- blocks the program changes (src/preload/foreign.h) ----
 * Each wrapper tells libhugezero.so which blocks the call touches, then
 * makes the real call, found here with RTLD_NEXT (see preload.h). */
#include <sys/ioctl.h>

#include "foreign.h"

/* The next definition of name, looked up once, at its first call. Not in
 * struct hz_next, resolved at start-up: these may be called before it (a
 * library's constructor, an allocator's own initialisation), where start-up
 * must not run; the library needs none of them in its table. */
#define NEXT(type, name)                                                     \
	({                                                                   \
		static __typeof__(type) next_;                               \
		__typeof__(type) fn_ = __atomic_load_n(&next_, __ATOMIC_RELAXED); \
		if (fn_ == NULL) {                                           \
			fn_ = (__typeof__(type))dlsym(RTLD_NEXT, name);      \
			__atomic_store_n(&next_, fn_, __ATOMIC_RELAXED);     \
		}                                                            \
		fn_;                                                         \
	})

/* A function this C library lacks fails as the kernel would without it. */
#define CALL_NEXT(type, name, ...)                                           \
	({                                                                   \
		__typeof__(type) f_ = NEXT(type, name);                      \
		f_ ? f_(__VA_ARGS__) : (errno = ENOSYS, -1);                 \
	})

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(void *, size_t, int), "mprotect", addr, len, prot);
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(void *, size_t, int, int), "pkey_mprotect", addr, len, prot,
			 pkey);
}

EXPORT int mlock(const void *addr, size_t len)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(const void *, size_t), "mlock", addr, len);
}

EXPORT int mlock2(const void *addr, size_t len, unsigned int flags)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(const void *, size_t, unsigned int), "mlock2", addr, len, flags);
}

EXPORT int mlockall(int flags)
{
	int ret;

	hz_foreign_lock_all_begin(flags);
	ret = CALL_NEXT(int (*)(int), "mlockall", flags);
	hz_foreign_lock_all_end(flags, ret);
	return ret;
}

EXPORT int munlockall(void)
{
	int ret = CALL_NEXT(int (*)(void), "munlockall");

	hz_foreign_unlock_all_end(ret);
	return ret;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	hz_foreign_advised(addr, len, advice);
	return CALL_NEXT(int (*)(void *, size_t, int), "madvise", addr, len, advice);
}

/* glibc's posix_madvise makes the system call itself, past madvise. It
 * returns an error number, not -1. */
EXPORT int posix_madvise(void *addr, size_t len, int advice)
{
	int (*fn)(void *, size_t, int) = NEXT(int (*)(void *, size_t, int), "posix_madvise");

	hz_foreign_advised(addr, len, advice);
	return fn ? fn(addr, len, advice) : ENOSYS;
}

/* One pointer-sized argument or none: what every ioctl request takes. */
EXPORT int ioctl(int fd, unsigned long request, ...)
{
	void *arg;
	va_list ap;
	int ret;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	ret = CALL_NEXT(int (*)(int, unsigned long, void *), "ioctl", fd, request, arg);
	hz_foreign_ioctl_end(request, arg, ret);
	return ret;
}

/* ---- resource limits ----
 * setrlimit, prlimit and their 64-bit names (programs built with
 * _FILE_OFFSET_BITS=64 call those): a lowered RLIMIT_AS first shrinks what
 * hugezero holds unused (src/preload/limits.c), then the real call sets it.
 * The 64-bit names take the same layout on 64-bit targets. */
#include <sys/resource.h>
#include <unistd.h>

#include "limits.h"

#define SETRLIMIT_FN int (*)(__rlimit_resource_t, const struct rlimit *)
#define PRLIMIT_FN int (*)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *)

EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
	ready();
	hz_preload_setrlimit((int)resource, rl);
	return CALL_NEXT(SETRLIMIT_FN, "setrlimit", resource, rl);
}

EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
	ready();
	hz_preload_setrlimit((int)resource, (const struct rlimit *)rl);
	return CALL_NEXT(SETRLIMIT_FN, "setrlimit64", resource, (const struct rlimit *)rl);
}

/* Another process's limit is its own business. */
static void prlimit_begin(pid_t pid, __rlimit_resource_t resource, const struct rlimit *rl)
{
	ready();
	if (pid == 0 || pid == getpid())
		hz_preload_setrlimit((int)resource, rl);
}

EXPORT int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *rl,
		   struct rlimit *old)
{
	prlimit_begin(pid, resource, rl);
	return CALL_NEXT(PRLIMIT_FN, "prlimit", pid, resource, rl, old);
}

EXPORT int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *rl,
		     struct rlimit64 *old)
{
	prlimit_begin(pid, resource, (const struct rlimit *)rl);
	return CALL_NEXT(PRLIMIT_FN, "prlimit64", pid, resource, (const struct rlimit *)rl,
			 (struct rlimit *)old);
}

/* ---- malloc's introspection and tuning (introspect.c) ----
 * The next library's answer first, then the blocks'. glibc's are found
 * even when the next allocator is a program's own without them (jemalloc
 * has no malloc_trim): they then answer for glibc's idle heap, as they
 * would without the preload. */
#include "introspect.h"

EXPORT int malloc_trim(size_t pad)
{
	ready();
	return hz_preload_malloc_trim(NEXT(int (*)(size_t), "malloc_trim"), pad);
}

EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 (*fn)(void) = NEXT(struct mallinfo2 (*)(void), "mallinfo2");
	struct mallinfo2 m = { 0 };

	if (fn != NULL)
		m = fn();
	ready();
	hz_preload_mallinfo2(&m);
	return m;
}

EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo (*fn)(void) = NEXT(struct mallinfo (*)(void), "mallinfo");
	struct mallinfo m = { 0 };

	if (fn != NULL)
		m = fn();
	ready();
	hz_preload_mallinfo(&m);
	return m;
}

EXPORT void malloc_stats(void)
{
	ready();
	hz_preload_malloc_stats(NEXT(void (*)(void), "malloc_stats"));
}

EXPORT int malloc_info(int options, FILE *fp)
{
	ready();
	return hz_preload_malloc_info(NEXT(int (*)(int, FILE *), "malloc_info"), options, fp);
}

/* Start-up first: it reads MALLOC_PERTURB_, which a later mallopt
 * overrides, as in glibc. */
EXPORT int mallopt(int param, int value)
{
	int (*fn)(int, int) = NEXT(int (*)(int, int), "mallopt");
	int ret;

	ready();
	ret = fn != NULL ? fn(param, value) : 0;
	hz_preload_mallopt(param, value, ret);
	return ret;
}

/* ---- namespaces (ns.c): the pre-zero thread stops first ---- */

EXPORT int unshare(int flags)
{
	return hz_preload_unshare(NEXT(int (*)(int), "unshare"), flags);
}

EXPORT int setns(int fd, int nstype)
{
	return hz_preload_setns(NEXT(int (*)(int, int), "setns"), fd, nstype);
}

/* ---- calls that make a task (tasks.c): made again when the pre-zero
 * thread held the task they needed ---- */
#include <pthread.h>
#include <sched.h>
#include <spawn.h>

#include "tasks.h"

/* pthread_create, looked up with the allocator (the end of the file):
 * hugezero starts its own thread through this symbol, maybe while it
 * holds one of its locks, where dlsym's loader lock must not be taken. */
static hz_pthread_create_fn next_pthread_create;

static hz_pthread_create_fn pthread_create_next(void)
{
	hz_pthread_create_fn fn = __atomic_load_n(&next_pthread_create, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (hz_pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
		__atomic_store_n(&next_pthread_create, fn, __ATOMIC_RELAXED);
	}
	return fn;
}

EXPORT pid_t fork(void)
{
	return hz_preload_fork(NEXT(pid_t (*)(void), "fork"));
}

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg)
{
	return hz_preload_pthread_create(pthread_create_next(), __builtin_return_address(0),
					 thread, attr, fn, arg);
}

/* The three arguments after arg are read whatever flags say, as glibc's
 * own clone passes every register on to the kernel. */
EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	pid_t *parent_tid, *child_tid;
	void *tls;
	va_list ap;

	va_start(ap, arg);
	parent_tid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	child_tid = va_arg(ap, pid_t *);
	va_end(ap);
	return hz_preload_clone(NEXT(hz_clone_fn, "clone"), fn, stack, flags, arg, parent_tid, tls,
				child_tid);
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return hz_preload_posix_spawn(NEXT(hz_spawn_fn, "posix_spawn"), pid, path, actions, attr,
				      argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return hz_preload_posix_spawn(NEXT(hz_spawn_fn, "posix_spawnp"), pid, file, actions, attr,
				      argv, envp);
}

EXPORT int system(const char *command)
{
	return hz_preload_system(NEXT(int (*)(const char *), "system"), command);
}

/* Calls that change the calling thread's capabilities or sandbox (only
 * the caller's: creds.c stops the pre-zero thread first). glibc declares
 * capset in no header; prctl takes up to four more arguments, read as
 * glibc's own wrapper passes them. */
#include <sys/syscall.h>

EXPORT int capset(void *header, void *data)
{
	hz_preload_security_call(SYS_capset, 0);
	return CALL_NEXT(int (*)(void *, void *), "capset", header, data);
}

EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	hz_preload_security_call(SYS_prctl, option);
	return CALL_NEXT(int (*)(int, ...), "prctl", option, a[0], a[1], a[2], a[3]);
}

/* ---- the next allocator at the C library's symbol versions ----
 * A program linked against glibc refers to malloc@GLIBC_2.2.5 (x86_64;
 * GLIBC_2.17 on aarch64), and ld.so binds it to the first object that
 * defines that version, even as a non-default one: glibc's
 * libc_malloc_debug.so defines malloc & co. only at malloc@GLIBC_2.2.5,
 * which dlsym (it asks for the default version) passes over. So look the
 * allocator up the way the program's own reference binds, and keep what
 * dlsym found where the version is not defined. An allocator without
 * version information (jemalloc, a program's own) matches either way. */
#include "syscall.h"

/* The C library's syscall() (the end of the file), looked up with the
 * allocator: a program may make its first syscall() anywhere, a signal
 * handler included (gettid, futex), where dlsym, which takes the loader's
 * lock, must not run. */
static hz_syscall_fn next_syscall;

static hz_syscall_fn syscall_next(void)
{
	hz_syscall_fn fn = __atomic_load_n(&next_syscall, __ATOMIC_RELAXED);

	if (fn == NULL) {
		fn = (hz_syscall_fn)dlsym(RTLD_NEXT, "syscall");
		__atomic_store_n(&next_syscall, fn, __ATOMIC_RELAXED);
	}
	return fn;
}

#if defined(__x86_64__)
#define LIBC_BASE "GLIBC_2.2.5"
#define LIBC_ALIGNED_ALLOC "GLIBC_2.16"
#elif defined(__aarch64__)
#define LIBC_BASE "GLIBC_2.17"
#define LIBC_ALIGNED_ALLOC "GLIBC_2.17"
#endif

#ifdef LIBC_BASE
#define VERSIONED(field, name, version)                                      \
	do {                                                                 \
		void *fn_ = dlvsym(RTLD_NEXT, name, version);                \
		if (fn_ != NULL)                                             \
			next->field = (__typeof__(next->field))fn_;          \
	} while (0)

#include <link.h>

/* Whether the object defining a comes before the one defining b in the
 * search order (the link map's order, for objects loaded at start). */
static int searched_before(void *a, void *b)
{
	Dl_info ia, ib;
	struct link_map *ma = NULL, *mb = NULL;

	if (dladdr1(a, &ia, (void **)&ma, RTLD_DL_LINKMAP) == 0 ||
	    dladdr1(b, &ib, (void **)&mb, RTLD_DL_LINKMAP) == 0 || ma == NULL || ma == mb)
		return 0;
	for (struct link_map *m = ma->l_next; m != NULL; m = m->l_next)
		if (m == mb)
			return 1;
	return 0;
}

static void resolve_versioned(struct hz_next *next)
{
	/* malloc and free come from one object: both versioned or neither. */
	void *vmalloc = dlvsym(RTLD_NEXT, "malloc", LIBC_BASE);
	void *vfree = dlvsym(RTLD_NEXT, "free", LIBC_BASE);

	syscall_next();
	pthread_create_next();
	/* dlvsym passes over a definition without version information in an
	 * object that has some (jemalloc's malloc), which the program's
	 * reference does bind to: the versioned answer counts only when it
	 * comes before dlsym's in the search order. */
	if (vmalloc == NULL || vfree == NULL || next->next_malloc == NULL ||
	    !searched_before(vmalloc, (void *)next->next_malloc))
		return;
	next->next_malloc = (void *(*)(size_t))vmalloc;
	next->next_free = (void (*)(void *))vfree;
	VERSIONED(next_calloc, "calloc", LIBC_BASE);
	VERSIONED(next_realloc, "realloc", LIBC_BASE);
	VERSIONED(next_posix_memalign, "posix_memalign", LIBC_BASE);
	VERSIONED(next_aligned_alloc, "aligned_alloc", LIBC_ALIGNED_ALLOC);
	VERSIONED(next_memalign, "memalign", LIBC_BASE);
	VERSIONED(next_valloc, "valloc", LIBC_BASE);
	VERSIONED(next_pvalloc, "pvalloc", LIBC_BASE);
	VERSIONED(next_malloc_usable_size, "malloc_usable_size", LIBC_BASE);
}
#else
static void resolve_versioned(struct hz_next *next)
{
	(void)next; /* no known base version here: dlsym's answer stands */
	syscall_next();
	pthread_create_next();
}
#endif

/* ---- syscall(2) (syscall.c): the memory calls above, made by number ----
 * glibc's syscall() takes the number and six longs, whatever the call
 * uses (its own implementation loads six registers): read as many. */

EXPORT long syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return hz_preload_syscall(syscall_next(), nr, a);
}
