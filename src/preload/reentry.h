/* A signal handler's call into the library while the thread it
 * interrupted was inside it: see reentry.c. */
#ifndef HZ_PRELOAD_REENTRY_H
#define HZ_PRELOAD_REENTRY_H

#include <stdbool.h>

/* Mark this thread inside the library's large paths, which take locks:
 * true. false: it was inside already, so this is a signal handler that
 * interrupted it, and must take no lock of ours. */
bool hz_reentry_enter(void);

/* The mark off, after hz_reentry_enter returned true; then the frees
 * handlers deferred meanwhile are made. */
void hz_reentry_leave(void);

/* A handler's free of block p, made at the next hz_reentry_leave of any
 * thread. false: the list is full, and p stays allocated (leaked, which
 * is better than a hang). */
bool hz_reentry_defer_free(void *p);

#endif /* HZ_PRELOAD_REENTRY_H */
