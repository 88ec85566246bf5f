/* The calls that make a task (fork, pthread_create, clone, posix_spawn,
 * system, and clone, clone3 and fork by number): see tasks.c. Exported
 * for the shim only, like preload.h's hz_preload_* functions: not a
 * public API. */
#ifndef HZ_PRELOAD_TASKS_H
#define HZ_PRELOAD_TASKS_H

#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/types.h>

#include "preload.h"

typedef int (*hz_pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
				    void *);
typedef int (*hz_clone_fn)(int (*)(void *), void *, int, void *, ...);
typedef int (*hz_spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]);

/* Each makes the call through real (the C library's; NULL: ENOSYS as the
 * call reports it) and, when it failed with EAGAIN while the pre-zero
 * thread ran, stops the thread and makes it once more. Results and errno
 * are the real call's; after a retry that succeeds, errno is what it was
 * before the call. */
HZ_PRIVATE_API pid_t hz_preload_fork(pid_t (*real)(void));
/* hugezero's own thread never comes here: prim/thread.c calls the C
 * library's pthread_create, which the preload hands it at start-up. */
HZ_PRIVATE_API int hz_preload_pthread_create(hz_pthread_create_fn real, pthread_t *thread,
					     const pthread_attr_t *attr, void *(*fn)(void *),
					     void *arg);
HZ_PRIVATE_API int hz_preload_clone(hz_clone_fn real, int (*fn)(void *), void *stack, int flags,
				    void *arg, pid_t *parent_tid, void *tls, pid_t *child_tid);
/* posix_spawn and posix_spawnp alike. */
HZ_PRIVATE_API int hz_preload_posix_spawn(hz_spawn_fn real, pid_t *pid, const char *file,
					  const posix_spawn_file_actions_t *actions,
					  const posix_spawnattr_t *attr, char *const argv[],
					  char *const envp[]);
HZ_PRIVATE_API int hz_preload_system(int (*real)(const char *), const char *command);

/* For syscall.c: a call by number that makes a task failed with err.
 * Whether to make it again (the pre-zero thread was stopped and its task
 * released). */
bool hz_tasks_again(int err);

#endif /* HZ_PRELOAD_TASKS_H */
