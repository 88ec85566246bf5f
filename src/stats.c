/* Counters and the exit report. See stats.h. */
#include "stats.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "exec/exec.h"
#include "log.h"
#include "options.h"
#include "prim/prim.h"

struct hz_stats hz_stats;

static const char *const backing_names[HZ_BACKING_COUNT] = {
	[HZ_BACKING_HUGETLB1G] = "hugetlb1g",
	[HZ_BACKING_HUGETLB2M] = "hugetlb2m",
	[HZ_BACKING_THP] = "thp",
	[HZ_BACKING_SMALL] = "4k",
};

static const char *const fallback_names[HZ_FB_COUNT] = {
	[HZ_FB_POOL_EMPTY] = "hugetlb_pool_short",
	[HZ_FB_HUGETLB_FAILED] = "hugetlb_mmap_failed",
	[HZ_FB_THP_UNAVAILABLE] = "thp_unavailable",
	[HZ_FB_THP_SLOW] = "fresh_thp_slow",
	[HZ_FB_RESERVE_FULL] = "reservation_full",
	[HZ_FB_MAP_FAILED] = "map_failed",
};

const char *hz_backing_name(enum hz_backing b)
{
	return (unsigned)b < HZ_BACKING_COUNT ? backing_names[b] : "?";
}

const char *hz_fallback_name(enum hz_fallback f)
{
	return (unsigned)f < HZ_FB_COUNT ? fallback_names[f] : "?";
}

void hz_stats_fallback(enum hz_fallback why)
{
	hz_stats_add(fallbacks[why], 1);
}

void hz_stats_live(int64_t delta)
{
	uint64_t live = __atomic_add_fetch(&hz_stats.live_bytes, (uint64_t)delta,
					   __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&hz_stats.peak_bytes, __ATOMIC_RELAXED);

	while (delta > 0 && live > peak &&
	       !__atomic_compare_exchange_n(&hz_stats.peak_bytes, &peak, live, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* A fixed buffer that report lines are appended to; never allocates. */
struct text {
	char buf[4096];
	size_t len;
};

__attribute__((format(printf, 2, 3)))
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len >= sizeof(t->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, sizeof(t->buf) - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
	if (t->len > sizeof(t->buf))
		t->len = sizeof(t->buf);
}

#define MIB(x) ((double)(x) / (1 << 20))

static double clear_rate_gbs(const struct hz_stats *s)
{
	return s->clear_ns ? (double)s->cleared_bytes / (double)s->clear_ns : 0.0;
}

static void exec_line(void *ctx, const char *line)
{
	put(ctx, "hugezero:   %s\n", line);
}

static void human(struct text *t, const struct hz_stats *s)
{
	put(t, "hugezero: stats for pid %d\n", (int)hz_prim_getpid());
	put(t, "hugezero:   large requests  %llu served, peak %.1f MiB live\n",
	    (unsigned long long)s->mallocs, MIB(s->peak_bytes));
	put(t, "hugezero:   new blocks     ");
	for (int b = 0; b < HZ_BACKING_COUNT; b++)
		put(t, " %s %llu (%.1f MiB)%s", backing_names[b],
		    (unsigned long long)s->blocks[b], MIB(s->bytes[b]),
		    b + 1 < HZ_BACKING_COUNT ? "," : "\n");
	put(t, "hugezero:   fallbacks      ");
	for (int f = 0; f < HZ_FB_COUNT; f++)
		put(t, " %s %llu%s", fallback_names[f],
		    (unsigned long long)s->fallbacks[f], f + 1 < HZ_FB_COUNT ? "," : "\n");
	put(t, "hugezero:   calloc          %llu calls, %.1f MiB; zeroed by calloc %.1f MiB "
	       "at %.1f GB/s\n",
	    (unsigned long long)s->callocs, MIB(s->calloc_bytes),
	    MIB(s->cleared_bytes), clear_rate_gbs(s));
	put(t, "hugezero:   recycling       %llu reused, %llu fresh; cache %.1f MiB now, "
	       "%.1f MiB given back; pre-zeroed %.1f MiB at %.1f GB/s, %llu takeovers, "
	       "%llu given up, %llu pauses when starved of CPU; %.1f MiB of calloc's clears "
	       "done by the thread beside it\n",
	    (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
	    MIB(s->cache_bytes), MIB(s->cache_released_bytes), MIB(s->prezeroed_bytes),
	    s->prezero_ns ? (double)s->prezeroed_bytes / (double)s->prezero_ns : 0.0,
	    (unsigned long long)s->takeovers, (unsigned long long)s->takeovers_abandoned,
	    (unsigned long long)s->prezero_starved, MIB(s->assisted_bytes));
	put(t, "hugezero:   page size      %llu blocks moved to 4 KiB pages after sparse use, "
	       "%llu back to THP after dense use\n",
	    (unsigned long long)s->thp_demoted, (unsigned long long)s->thp_promoted);
	put(t, "hugezero:   realloc         %llu moved by mremap, %llu in place, "
	       "%llu copied\n",
	    (unsigned long long)s->realloc_moved,
	    (unsigned long long)s->realloc_in_place,
	    (unsigned long long)s->realloc_copied);
	put(t, "hugezero:   mmap            %llu aligned for THP (%.1f MiB)\n",
	    (unsigned long long)s->mmaps_aligned, MIB(s->mmap_bytes));
	hz_exec_report(exec_line, t);
}

/* What HUGEZERO_EXEC did to executable text (the folio coverage, which
 * needs a scan of the page tables, is in the text report only). */
static void json_exec(struct text *t)
{
	struct hz_exec_stats e;

	hz_exec_stats_get(&e);
	put(t, " \"exec\": {\"mode\": \"%s\", \"segments\": %llu, \"text_bytes\": %llu, "
	       "\"advised_bytes\": %llu, \"unaligned_bytes\": %llu, "
	       "\"prewarmed_bytes\": %llu, \"prewarm_ns\": %llu,\n",
	    hz_exec_mode_name(hz_exec_mode()), (unsigned long long)e.segments,
	    (unsigned long long)e.text_bytes, (unsigned long long)e.advised_bytes,
	    (unsigned long long)e.unaligned_bytes, (unsigned long long)e.prewarmed_bytes,
	    (unsigned long long)e.prewarm_ns);
	put(t, "  \"collapsed_bytes\": %llu, \"remapped_bytes\": %llu, \"remap_ns\": %llu, "
	       "\"remap_skipped\": %llu, \"dlopens\": %llu, \"perfmap_lines\": %llu}}\n",
	    (unsigned long long)e.collapsed_bytes, (unsigned long long)e.remapped_bytes,
	    (unsigned long long)e.remap_ns, (unsigned long long)e.remap_skipped,
	    (unsigned long long)e.dlopens, (unsigned long long)e.perfmap_lines);
}

static void json(struct text *t, const struct hz_stats *s)
{
	put(t, "{\"pid\": %d, \"large_requests\": %llu, "
	       "\"peak_bytes\": %llu, \"live_bytes\": %llu,\n",
	    (int)hz_prim_getpid(), (unsigned long long)s->mallocs,
	    (unsigned long long)s->peak_bytes, (unsigned long long)s->live_bytes);
	put(t, " \"blocks\": {");
	for (int b = 0; b < HZ_BACKING_COUNT; b++)
		put(t, "\"%s\": {\"count\": %llu, \"bytes\": %llu}%s", backing_names[b],
		    (unsigned long long)s->blocks[b], (unsigned long long)s->bytes[b],
		    b + 1 < HZ_BACKING_COUNT ? ", " : "},\n");
	put(t, " \"fallbacks\": {");
	for (int f = 0; f < HZ_FB_COUNT; f++)
		put(t, "\"%s\": %llu%s", fallback_names[f],
		    (unsigned long long)s->fallbacks[f], f + 1 < HZ_FB_COUNT ? ", " : "},\n");
	put(t, " \"callocs\": %llu, \"calloc_bytes\": %llu, \"cleared_bytes\": %llu, "
	       "\"clear_ns\": %llu,\n",
	    (unsigned long long)s->callocs, (unsigned long long)s->calloc_bytes,
	    (unsigned long long)s->cleared_bytes, (unsigned long long)s->clear_ns);
	put(t, " \"cache_hits\": %llu, \"cache_misses\": %llu, \"cache_bytes\": %llu, "
	       "\"cache_released_bytes\": %llu, \"prezeroed_bytes\": %llu, "
	       "\"prezero_ns\": %llu, \"takeovers\": %llu, \"takeovers_abandoned\": %llu, "
	       "\"prezero_starved\": %llu, \"assisted_bytes\": %llu, "
	       "\"thp_demoted\": %llu, "
	       "\"thp_promoted\": %llu,\n",
	    (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
	    (unsigned long long)s->cache_bytes, (unsigned long long)s->cache_released_bytes,
	    (unsigned long long)s->prezeroed_bytes, (unsigned long long)s->prezero_ns,
	    (unsigned long long)s->takeovers, (unsigned long long)s->takeovers_abandoned,
	    (unsigned long long)s->prezero_starved, (unsigned long long)s->assisted_bytes,
	    (unsigned long long)s->thp_demoted,
	    (unsigned long long)s->thp_promoted);
	put(t, " \"realloc_moved\": %llu, \"realloc_in_place\": %llu, "
	       "\"realloc_copied\": %llu, \"mmaps_aligned\": %llu, \"mmap_bytes\": %llu,\n",
	    (unsigned long long)s->realloc_moved,
	    (unsigned long long)s->realloc_in_place,
	    (unsigned long long)s->realloc_copied,
	    (unsigned long long)s->mmaps_aligned, (unsigned long long)s->mmap_bytes);
	json_exec(t);
}

/* Expand %p to the pid and %% to %; returns -1 when it does not fit. */
static int expand_path(const char *pattern, char *out, size_t size)
{
	size_t o = 0;

	for (const char *p = pattern; *p; p++) {
		int n;

		if (p[0] == '%' && p[1] == 'p')
			n = snprintf(out + o, size - o, "%d", (int)hz_prim_getpid());
		else if (p[0] == '%' && p[1] == '%')
			n = snprintf(out + o, size - o, "%%");
		else
			n = snprintf(out + o, size - o, "%c", *p);
		if (n < 0 || (size_t)n >= size - o)
			return -1;
		o += (size_t)n;
		p += p[0] == '%' && (p[1] == 'p' || p[1] == '%');
	}
	return 0;
}

static void write_file(const char *pattern, const struct text *t)
{
	char path[HZ_OPTION_TEXT_MAX + 32];
	int fd;

	if (expand_path(pattern, path, sizeof(path)) != 0) {
		hz_warn("HUGEZERO_STATS_FILE=%s is too long; no stats written", pattern);
		return;
	}
	/* Created exclusively and never through a symlink: a stats path in a
	 * shared directory must not let another user redirect our write. */
	fd = hz_prim_create_file(path);
	if (fd < 0) {
		hz_warn("cannot create stats file %s (error %d); it must not exist yet",
			path, -fd);
		return;
	}
	hz_prim_write_all(fd, t->buf, t->len);
	hz_prim_close(fd);
}

/* 100 and up: out of the way of programs that expect low numbers free. */
#define REPORT_FD_MIN 100
static int report_fd = 2;

void hz_stats_keep_stderr(void)
{
	int fd;

	if (!hz_option_u64(HZ_OPT_STATS) || hz_option_str(HZ_OPT_STATS_FILE)[0])
		return;
	fd = hz_prim_dup_cloexec(2, REPORT_FD_MIN);
	if (fd >= 0)
		report_fd = fd;
}

void hz_stats_report(void)
{
	const char *file = hz_option_str(HZ_OPT_STATS_FILE);
	struct hz_stats snapshot;
	static struct text t; /* static: 4 KiB off a possibly small stack */

	memcpy(&snapshot, &hz_stats, sizeof(snapshot));
	t.len = 0;
	if (file[0] != '\0') {
		json(&t, &snapshot);
		write_file(file, &t);
	} else if (hz_option_u64(HZ_OPT_STATS)) {
		human(&t, &snapshot);
		hz_prim_write_all(report_fd, t.buf, t.len);
	}
}
