/* How long the pre-zero thread and the program take, and wait, for one
 * another: the times the ledger (classes.h), the thread (prezero.h), the
 * calloc cycle (cycle.h) and the promoter (promote.h) share. */
#ifndef HZ_TIMES_H
#define HZ_TIMES_H

/* 250 ms: the longest the pre-zero thread sleeps (it wakes sooner when a
 * stay in the cache ends), and the shortest stay a warm class gets (the
 * unit stays were counted in while the thread applied them at its wakes
 * only). */
#define HZ_STAY_TICK_NS 250000000ull

/* 20 us: how long the idle-priority pre-zero thread takes to run once
 * woken. Measured on the 8 MiB-L3 AMD EPYC VM: the futex call costs the
 * waker 3-4 us, and the thread runs 8-27 us later (p10-p50; milliseconds
 * when it is queued behind the program on its CPU); in 20 us it clears 0.4
 * MiB at most. So a program thread waiting on the thread (to leave its
 * turn at the table, to give back the spans it holds, to exit) sleeps this
 * long between looks, which gives it the CPU when they share one, and the
 * thread waits as long for a program thread to leave the table; and a
 * calloc this soon after its class's free comes before a woken thread
 * could clear much of the block (cycle.h). */
#define HZ_THREAD_WAKE_NS 20000

/* 1 s (four ticks): a block nobody reused this long is not in a cycle. A
 * cycling program reuses its blocks within milliseconds (numpy's loop
 * every 12 ms or so, the recycle benchmarks sooner). So a freed block of a
 * class that shows no reuse yet, a probe, is given back after it
 * (classes.c), and a kept block idle this long is made reclaimable
 * (MADV_FREE, prezero.c): the decay gives it back only after
 * HUGEZERO_DECAY_MS (5 s by default), and for the rest of that stay the
 * kernel may take it. */
#define HZ_UNREUSED_NS (4 * HZ_STAY_TICK_NS)

/* 1 s: long against anything the pre-zero thread does (microseconds to
 * milliseconds), short against a program's life. The longest a program
 * thread waits on the thread, for it to leave its loop (prezero_start.c)
 * or a collapse of a range being unmapped (promote.c): the waiter sleeps,
 * so even at idle priority the thread gets the CPU, and only a thread that
 * cannot run at all (stopped by a debugger) takes this long. And how long
 * a thread starved of CPU rests (prezero.c) before it tries again, while
 * calloc zeroes. */
#define HZ_THREAD_STUCK_NS 1000000000ull

#endif /* HZ_TIMES_H */
