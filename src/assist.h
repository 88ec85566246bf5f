/* Two cores for one big clear: a calloc that must zero a large dirty block
 * while the program waits shares the work with the pre-zero thread, chunk
 * by chunk. One shared job at a time; the caller never waits for a chunk
 * the thread has not started. */
#ifndef HZ_ASSIST_H
#define HZ_ASSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zero.h"

/* 8 MiB: each side takes this much at a time. A 256 MiB clear is 32
 * chunks, and the caller's last wait for the thread is at most one chunk
 * (0.4 ms at 20 GB/s). */
#define HZ_ASSIST_CHUNK ((size_t)8 << 20)

/* Open a job over [lo, lo + chunks * HZ_ASSIST_CHUNK), zeroed with method
 * and how. Returns false (nothing opened) when another job is open. */
bool hz_assist_open(uintptr_t lo, size_t chunks, enum hz_zero_method method,
		    enum hz_zero_how how);

/* The caller's share: take chunks until none is left, then close the job
 * and wait for the chunks the thread took. Returns the bytes the caller
 * wrote; *helped gets the thread's. */
size_t hz_assist_finish(size_t *helped);

/* The pre-zero thread: help with the open job, if any. Returns the bytes
 * it wrote. */
size_t hz_assist_help(void);

/* In a fork child: no job, nobody helping. */
void hz_assist_fork_child(void);

#endif /* HZ_ASSIST_H */
