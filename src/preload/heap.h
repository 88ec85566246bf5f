/* glibc's main heap on huge pages (heap.c). */
#ifndef HZ_PRELOAD_HEAP_H
#define HZ_PRELOAD_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "shim_abi.h"

/* At start-up, with the next allocator installed: watch glibc's break
 * through the shim's copy, unless the heap is to be left alone (a line at
 * HUGEZERO_VERBOSE=2 says why). shim NULL (no shim) watches nothing. */
void hz_heap_start(const struct hz_next *next, struct hz_shim_fast *shim);

/* What the shim's quiet_below is for small_below: requests from there
 * to small_below check the break. */
size_t hz_heap_quiet_below(size_t small_below);

/* The program called mallopt(param): a pad, trim or mmap threshold it set
 * is never overridden. */
void hz_heap_program_tunes(int param);

/* glibc grows its heap by its own step again, and the watch ends, from
 * the next malloc, calloc or realloc on (this only flags it: safe in a
 * signal handler): the program set a finite RLIMIT_DATA or RLIMIT_AS or
 * mlockall(MCL_FUTURE) (the pad could make a request fail), or hugezero
 * stepped aside for a seccomp filter. */
void hz_heap_end(void);

/* The program moved the break itself (sbrk or brk, shim_process.c):
 * the memory next to glibc's heap is its own, which advice must not
 * reach (sparse, it would fault huge pages), so the watch ends. glibc's
 * malloc moves the break through its internal __sbrk, never through
 * these. */
HZ_PRIVATE_API void hz_preload_program_moves_break(void);

/* In a fork child: a call the parent was making is not finished. */
void hz_heap_fork_child(void);

#endif /* HZ_PRELOAD_HEAP_H */
