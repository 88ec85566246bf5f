/* The generated test library: functions hzgen_f0 .. hzgen_f<n-1>, each 64
 * KiB of NOPs then `return x * (2i + 1) + i`, so running them all touches
 * all of the text and each result proves its function ran from intact
 * text; hzgen_table and hzgen_count list them. */
#ifndef HZ_TEST_EXEC_GEN_H
#define HZ_TEST_EXEC_GEN_H

#include <stdint.h>

/* 96 functions of 64 KiB: 6 MiB of text, three 2 MiB windows. */
#define HZ_GEN_FUNCTIONS 96

/* Write dir/gen.c and build dir/libhzgen.so with cc (soname libhzgen.so).
 * Returns 0 or -1 with a message printed. */
int hz_gen_build(const char *cc, const char *dir, int functions);

/* Copy src to dst, write it back, drop it from the page cache
 * (POSIX_FADV_DONTNEED) and return the bytes still cached (cachestat or
 * mincore), or -1. */
int64_t hz_gen_copy_cold(const char *src, const char *dst);

/* Drop an existing file from the page cache; returns the bytes still
 * cached, or -1. */
int64_t hz_gen_drop(const char *path);

/* Wrong results among the generated functions of a dlopen handle; -1 when
 * the symbols are missing. */
int hz_gen_check(void *handle);

#endif
