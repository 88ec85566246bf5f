/* A mutex that knows its owner, so fork handlers can tell "another thread
 * holds it" (wait for it) from "this thread holds it and fork was called
 * from a signal handler that interrupted us" (do not wait: that deadlocks). */
#ifndef HZ_LOCK_H
#define HZ_LOCK_H

#include <pthread.h>
#include <stdbool.h>

struct hz_lock {
	pthread_mutex_t mutex;
	pthread_t owner;
	bool owned;
};

#define HZ_LOCK_INIT { PTHREAD_MUTEX_INITIALIZER, 0, false }

/* The slow path, for a lock another thread holds: waits, and counts the
 * wait and its time (lock_waits, lock_wait_ns in the stats), so that
 * contention between the program's threads shows in every report. */
void hz_lock_wait(struct hz_lock *l);

static inline void hz_lock(struct hz_lock *l)
{
	if (pthread_mutex_trylock(&l->mutex) != 0)
		hz_lock_wait(l);
	__atomic_store_n(&l->owner, pthread_self(), __ATOMIC_RELAXED);
	__atomic_store_n(&l->owned, true, __ATOMIC_RELEASE);
}

static inline void hz_unlock(struct hz_lock *l)
{
	__atomic_store_n(&l->owned, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&l->mutex);
}

static inline bool hz_lock_held_here(struct hz_lock *l)
{
	return __atomic_load_n(&l->owned, __ATOMIC_ACQUIRE) &&
	       pthread_equal(__atomic_load_n(&l->owner, __ATOMIC_RELAXED), pthread_self());
}

/* In a fork child: the parent's other threads are gone, so the lock is
 * free whatever state it was copied in. */
static inline void hz_lock_reset(struct hz_lock *l)
{
	pthread_mutex_init(&l->mutex, NULL);
	l->owned = false;
}

#endif /* HZ_LOCK_H */
