/* When a call may enter the library's large paths, which take locks: not
 * from a signal handler that interrupted this thread inside them, not
 * while this thread is inside fork; and the frees of blocks that wait
 * until it may. See reentry.c. */
#ifndef HZ_PRELOAD_REENTRY_H
#define HZ_PRELOAD_REENTRY_H

#include <stdbool.h>

/* Mark this thread inside the library's large paths: true. false: it was
 * inside already, so this is a signal handler that interrupted it, and
 * must take no lock of ours. */
bool hz_reentry_enter(void);

/* The mark off, after hz_reentry_enter returned true; the frees that
 * waited meanwhile are made first. */
void hz_reentry_leave(void);

/* Free block p (a hugezero block): now, or, when this thread may not
 * enter (a handler inside the library, or a fork under way: the fork
 * handlers hold the mark too, start.c), at the next hz_reentry_leave of
 * any thread. Keeps errno. */
void hz_reentry_free(void *p);

#endif /* HZ_PRELOAD_REENTRY_H */
