/* LD_PRELOAD shim for bench/exec-run: what libhugezero-preload.so does once
 * it calls hz_exec_start() at start-up and sends dlopen through
 * hz_exec_dlopen(), plus one measurement at exit.
 *
 * Built by exec-run against the static core (libhugezero-core.a), so it
 * works before the preload is wired. At exit it appends one CSV row to
 * $HZ_EXEC_BENCH_OUT for the process whose executable's base name is
 * $HZ_EXEC_BENCH_EXE: its text by folio size (folios.h categories), and
 * what each mode cost. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "exec/folios.h"

static double start_ms;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((constructor)) static void shim_start(void)
{
	double t = now_ms();

	hz_exec_start();
	start_ms = now_ms() - t;
}

__attribute__((visibility("default"))) void *dlopen(const char *file, int flags)
{
	static void *(*real)(const char *, int);

	if (real == NULL)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	return hz_exec_dlopen(real, file, flags);
}

__attribute__((destructor)) static void shim_stop(void)
{
	const char *out = getenv("HZ_EXEC_BENCH_OUT"), *only = getenv("HZ_EXEC_BENCH_EXE");
	const char *mode = getenv("HZ_EXEC_BENCH_MODE");
	struct hz_folio_counts c = { .precise = true };
	struct hz_exec_stats s;
	char exe[512], *base;
	uint64_t unaligned = 0;
	ssize_t n;
	FILE *f;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (out == NULL || n <= 0)
		return;
	exe[n] = '\0';
	base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	if (only != NULL && strcmp(base, only) != 0)
		return;
	if (hz_folios_text(0, &c) != 0)
		return;
	hz_exec_stats_get(&s);
	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++)
		unaligned += c.unaligned[o];
	f = fopen(out, "a");
	if (f == NULL)
		return;
	fprintf(f, "%s,%s,%d,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%.2f,%.2f,%llu,%.2f,%llu\n",
		base, mode ? mode : "?", c.precise,
		(unsigned long long)c.mapped, (unsigned long long)c.resident,
		(unsigned long long)c.aligned[0], (unsigned long long)c.aligned[2],
		(unsigned long long)c.aligned[4], (unsigned long long)c.aligned[9],
		(unsigned long long)hz_folio_counts_aligned_from(&c, 4),
		(unsigned long long)unaligned, (unsigned long long)c.partial,
		(unsigned long long)c.cont64k, start_ms, (double)s.prewarm_ns / 1e6,
		(unsigned long long)s.prewarmed_bytes, (double)s.remap_ns / 1e6,
		(unsigned long long)s.remapped_bytes);
	fclose(f);
}
