/* dlopen under the preload: nothing of ld.so's search re-implemented. The
 * shim jumps to the real dlopen after hz_exec_dlopen_begin, so the caller
 * glibc sees is the program's; the mode is applied to the new objects
 * when the calling thread next enters hugezero. See dlopen.h. */
#include "dlopen.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../prim/prim.h"
#include "../stats.h"
#include "apply.h"
#include "mode.h"
#include "prewarm.h"
#include "segments.h"

__thread bool hz_exec_dlopen_pending;

/* dlopen calls begun in the process: a settle that sees more than its
 * own cannot tell its objects from another thread's. */
static unsigned long begun;

/* The loader's state when this thread's pending dlopen began. */
struct before_call {
	unsigned objects, threads;
	uint64_t adds, subs;
	unsigned long begun;
};

static __thread struct before_call before;

/* Only a path ld.so opens as written can be prewarmed before the call:
 * a name without a slash is searched for in directories that depend on
 * the caller, and $ORIGIN, $LIB and $PLATFORM are expanded against it.
 * Those are prewarmed after the fact instead: hz_exec_apply prewarms the
 * still-cold 2 MiB windows of the mapped text, as at start-up. */
static bool path_as_written(const char *file)
{
	return file != NULL && strchr(file, '/') != NULL && strchr(file, '$') == NULL;
}

static void prewarm(const char *file)
{
	struct hz_prewarm_result res;

	if (hz_exec_prewarm_file(file, false, &res) == 0 && res.populated) {
		hz_exec_stat_add(prewarmed_bytes, res.populated);
		hz_exec_stat_add(prewarm_ns, res.ns);
	}
}

/* Apply the mode to what was loaded since this thread's dlopen began.
 * Another thread's dlopen may have run meanwhile, so what it loaded is
 * treated as ours: advising it twice is harmless, moving it is not (its
 * own thread may be running its constructors), so remap waits for a call
 * that ran alone and started no threads. */
static void apply_loaded(enum hz_exec_mode mode, const struct before_call *b)
{
	unsigned objects, threads = 0, first = b->objects;
	uint64_t adds, subs;
	char why[64] = "";

	hz_exec_objects(&objects, &adds, &subs);
	if (adds == b->adds)
		return;
	hz_prim_thread_count(&threads);
	if (threads > b->threads)
		snprintf(why, sizeof(why), "its constructors started threads");
	if (__atomic_load_n(&begun, __ATOMIC_RELAXED) != b->begun + 1)
		snprintf(why, sizeof(why), "another dlopen ran meanwhile");
	/* An unload in between (another thread's dlclose) shifts the
	 * indexes: advise everything again (idempotent), but move nothing
	 * that was loaded before this call. */
	if (subs != b->subs) {
		first = 0;
		snprintf(why, sizeof(why), "objects were unloaded meanwhile");
	}
	hz_exec_stat_add(dlopens, 1);
	hz_exec_apply(mode, first, why[0] == '\0', why);
}

/* A large allocation made while ld.so is still mapping the call's objects
 * (rare: its own are small) settles early and misses the objects mapped
 * after it; a constructor's comes after every object of the call is
 * mapped, and a constructor's own dlopen begins anew. */
void hz_exec_dlopen_settle_slow(void)
{
	int saved = errno;

	/* Cleared first: a large allocation made while applying comes back
	 * here and must find nothing to do. */
	hz_exec_dlopen_pending = false;
	apply_loaded(hz_exec_mode(), &before);
	errno = saved;
}

/* No lock of ours is held when the real dlopen runs: glibc's loader lock
 * is taken inside it, and a constructor that runs under that lock (a load
 * that did not come through here: dlmopen, NSS, iconv) may call dlopen,
 * which comes here; a lock taken before the loader's would deadlock it
 * with another thread waiting for the loader inside our lock. */
void hz_exec_dlopen_begin(const char *file, int flags)
{
	enum hz_exec_mode mode = hz_exec_mode();
	int saved = errno;

	hz_exec_dlopen_settle();
	/* RTLD_NOLOAD loads nothing; NULL is the program itself. */
	if (mode == HZ_EXEC_OFF || mode == HZ_EXEC_REPORT || file == NULL ||
	    (flags & RTLD_NOLOAD)) {
		errno = saved;
		return;
	}
	if (path_as_written(file))
		prewarm(file);
	before.begun = __atomic_fetch_add(&begun, 1, __ATOMIC_RELAXED);
	hz_exec_objects(&before.objects, &before.adds, &before.subs);
	hz_prim_thread_count(&before.threads);
	hz_exec_dlopen_pending = true;
	errno = saved;
}

void *hz_exec_dlopen(void *(*real_dlopen)(const char *, int), const char *file, int flags)
{
	void *handle;
	int saved;

	hz_exec_dlopen_begin(file, flags);
	handle = real_dlopen(file, flags);
	saved = errno;
	hz_exec_dlopen_settle();
	errno = saved;
	return handle;
}
