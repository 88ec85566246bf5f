/* The public side of the jemalloc hooks: the table, arena creation and
 * stats. See include/hugezero/jemalloc.h.
 *
 * libhugezero.so must not link jemalloc (that would replace malloc in every
 * program using the library), so mallctl is looked up at run time in the
 * program's own copy. Only these entry points call it, never a hook. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/types.h>

#include "../../include/hugezero/jemalloc.h"
#include "extents.h"
#include "hooks.h"

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Only a child handler: holding our lock across fork could deadlock with
 * jemalloc's own prefork handler (a thread inside a hook holds a jemalloc
 * lock and waits for ours). The child's other threads are gone, so the lock
 * is simply reset. */
static void register_fork_handler(void)
{
	pthread_atfork(NULL, NULL, hz_extents_fork_child);
}

HZ_API extent_hooks_t *hz_jemalloc_hooks(void)
{
	pthread_once(&fork_once, register_fork_handler);
	return &hz_jemalloc_hooks_table;
}

static mallctl_fn find_mallctl(void)
{
	void *f = dlsym(RTLD_DEFAULT, "mallctl");

	if (!f)
		f = dlsym(RTLD_DEFAULT, "je_mallctl");
	return (mallctl_fn)f;
}

HZ_API int hz_jemalloc_create_arena(unsigned *arena_ind)
{
	mallctl_fn ctl = find_mallctl();
	extent_hooks_t *hooks = hz_jemalloc_hooks();
	size_t len = sizeof(*arena_ind);

	if (!arena_ind)
		return EINVAL;
	if (!ctl)
		return ENOSYS;
	/* The new value is the pointer itself, so sizeof a pointer is right. */
	return ctl("arenas.create", arena_ind, &len, &hooks,
		   sizeof(hooks)); /* NOLINT(bugprone-sizeof-expression) */
}

size_t hz_jemalloc_oversize_threshold(void)
{
	mallctl_fn ctl = find_mallctl();
	size_t v = 0, len = sizeof(v);

	if (!ctl || ctl("opt.oversize_threshold", &v, &len, NULL, 0) != 0)
		return 0;
	return v;
}

int hz_jemalloc_destroy_arena(unsigned arena_ind)
{
	mallctl_fn ctl = find_mallctl();
	char name[64];

	if (!ctl)
		return ENOSYS;
	snprintf(name, sizeof(name), "arena.%u.destroy", arena_ind);
	return ctl(name, NULL, NULL, NULL, 0);
}

int hz_jemalloc_purge_at_once(unsigned arena_ind)
{
	static const char *const decays[] = { "dirty_decay_ms", "muzzy_decay_ms" };
	mallctl_fn ctl = find_mallctl();
	ssize_t zero = 0;
	char name[64];

	if (!ctl)
		return ENOSYS;
	for (unsigned i = 0; i < 2; i++) {
		int ret;

		snprintf(name, sizeof(name), "arena.%u.%s", arena_ind, decays[i]);
		ret = ctl(name, NULL, NULL, &zero, sizeof(zero));
		if (ret != 0)
			return ret;
	}
	return 0;
}

HZ_API int hz_jemalloc_stats(unsigned arena_ind, struct hz_jemalloc_stats *out)
{
	if (!out)
		return EINVAL;
	hz_extents_stats(arena_ind, out);
	return 0;
}
