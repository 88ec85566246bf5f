/* Helpers shared by the programs in bench/: huge-page buffers that are
 * faulted in before timing, clocks, statistics and option parsing.
 *
 * Benchmarks are not the library: they may make system calls directly and
 * exit on setup errors. */
#ifndef HZ_BENCH_UTIL_H
#define HZ_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* 2 MiB: the x86_64 and arm64 (4 KiB granule) PMD huge page. */
#define BENCH_HUGE (2u << 20)

/* An anonymous mapping aligned to BENCH_HUGE, advised MADV_HUGEPAGE and
 * touched on every 4 KiB page, so no timed code takes a page fault. */
struct bench_buf {
	char *p;       /* aligned start */
	size_t len;    /* a multiple of BENCH_HUGE */
};

/* Map, advise and pre-fault len bytes (rounded up to BENCH_HUGE). Exits with
 * a message when the mapping fails. */
void bench_buf_map(struct bench_buf *b, size_t len);
void bench_buf_unmap(struct bench_buf *b);

/* Bytes of b that /proc/self/smaps reports as AnonHugePages, and the size of
 * the mappings covering b. Returns 0, or -1 when smaps cannot be read. */
int bench_buf_thp(const struct bench_buf *b, size_t *huge, size_t *mapped);

/* If less than all of b is on huge pages, ask the kernel to collapse it
 * (MADV_COLLAPSE, Linux 6.1). Returns the resulting share, 0..1, or -1. */
double bench_buf_thp_share(const struct bench_buf *b, int collapse);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID):
 * time the scheduler gives to other tasks on this CPU is not in it. */
uint64_t bench_cpu_ns(void);

/* How often the calling thread has been preempted so far (involuntary
 * context switches); a timed section during which it changed is suspect. */
long bench_preemptions(void);

/* Time-stamp counter reads that do not let loads and stores cross them:
 * begin waits for earlier instructions before reading, end waits for them
 * too and keeps later ones from starting first. On non-x86 both fall back
 * to the monotonic clock (ticks are then nanoseconds). */
static inline uint64_t bench_ticks_begin(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ __volatile__("mfence\n\tlfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
#else
	return bench_now_ns();
#endif
}

static inline uint64_t bench_ticks_end(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi, aux;

	__asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	return ((uint64_t)hi << 32) | lo;
#else
	return bench_now_ns();
#endif
}

/* Ticks per nanosecond, measured once against CLOCK_MONOTONIC (~50 ms). */
double bench_ticks_per_ns(void);

/* Pin the calling thread to one CPU; -1 picks the highest allowed one.
 * Returns the CPU, or -1 when pinning failed (the bench still runs). */
int bench_pin(int cpu);

/* Median, minimum and maximum of v[0..n). v is sorted in place. */
struct bench_stat {
	double median, min, max;
	size_t n;
};
struct bench_stat bench_stat_of(double *v, size_t n);

/* "4K", "64KiB", "2M", "1G", "4096" -> bytes; 0 on a malformed value. */
size_t bench_parse_size(const char *s);

/* 4096 -> "4K", 2097152 -> "2M", 28 MiB -> "28M", 1 GiB -> "1G". */
const char *bench_size_str(size_t bytes, char *buf, size_t cap);

/* mkdir -p for the directory part of path. Returns 0 or -1. */
int bench_mkdir_for(const char *path);

/* The "model name" line of /proc/cpuinfo, or "unknown". */
const char *bench_cpu_model(char *buf, size_t cap);

/* Reads all of [p, p + len) (len a multiple of 64), 8 bytes per load, as a
 * program reading its fresh memory would, and returns a value that depends
 * on every load so nothing is optimised away. */
uint64_t bench_read(const void *p, size_t len);

/* Writes one word of every 64-byte line of [p, p + len), leaving the caches
 * full of dirty lines that are not the benchmark's, as a running program's
 * working set leaves them. */
void bench_dirty(void *p, size_t len);

#endif /* HZ_BENCH_UTIL_H */
