/* The exit report, laid out by the counter table. See report.h.
 *
 * The text puts each line's heading and then each counter's fragment
 * (stats.def); the JSON puts every counter under its key, one line of JSON
 * per line of text, with the exec and jemalloc counters in objects of their
 * own. Neither allocates: both are written into a fixed buffer. */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backing.h"
#include "exec/exec.h"
#include "exec/folios.h"
#include "log.h"
#include "options.h"
#include "prim/prim.h"
#include "sizes.h"

/* A fixed buffer that report lines are appended to, always NUL-terminated. */
struct text {
	char *buf;
	size_t size, len;
};

__attribute__((format(printf, 2, 3)))
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
	if (t->len >= t->size)
		t->len = t->size - 1;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (double)HZ_MIB;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static uint64_t value(const struct hz_stats *s, const struct hz_stat_row *r, unsigned i)
{
	return hz_stats_value(s, r->at + i * (unsigned)sizeof(uint64_t));
}

/* ---- text ---- */

/* A text line of the exec counters: the folio sizes of the text, which need
 * a scan of the page tables (so not in the JSON). */
static void folio_line(struct text *t, const char *when, const struct hz_folio_counts *c)
{
	uint64_t unaligned = 0;

	for (unsigned o = 1; o < HZ_FOLIO_ORDERS; o++)
		unaligned += c->unaligned[o];
	if (!c->precise) {
		put(t, "hugezero:   exec folios %-6s %.1f of %.1f MiB resident; PMD-mapped %.1f%%; "
		       "partial report: folio sizes need root (/proc/kpageflags)\n",
		    when, mib(c->resident), mib(c->mapped), pct(c->pmd_mapped, c->mapped));
		return;
	}
	put(t, "hugezero:   exec folios %-6s %.1f of %.1f MiB resident: 4K %.1f%%, "
	       "aligned >=64K %.1f%% (2M %.1f%%), unaligned %.1f%%, partial %.1f%%, "
	       "cont-64K %.1f%%\n",
	    when, mib(c->resident), mib(c->mapped), pct(c->aligned[0], c->mapped),
	    pct(hz_folio_counts_aligned_from(c, 4), c->mapped), pct(c->aligned[9], c->mapped),
	    pct(unaligned, c->mapped), pct(c->partial, c->mapped), pct(c->cont64k, c->mapped));
}

static void folio_lines(struct text *t)
{
	struct hz_folio_counts c;

	if (hz_exec_folios_at_start(&c) == 0)
		folio_line(t, "start", &c);
	memset(&c, 0, sizeof(c));
	if (hz_folios_text(0, &c) == 0)
		folio_line(t, "now", &c);
}

/* Whether any counter on the line that starts at row line is not 0. */
static bool line_used(const struct hz_stats *s, unsigned line)
{
	for (unsigned i = line + 1; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];
		unsigned n = r->kind == HZ_STAT_KIND_BACKINGS ? HZ_BACKING_COUNT
			   : r->kind == HZ_STAT_KIND_FALLBACKS ? HZ_FB_COUNT : 1;

		if (r->kind == HZ_STAT_KIND_LINE)
			break;
		for (unsigned k = 0; k < n; k++)
			if (value(s, r, k) != 0 ||
			    (r->kind == HZ_STAT_KIND_BACKINGS &&
			     hz_stats_value(s, r->at2 + k * (unsigned)sizeof(uint64_t)) != 0))
				return true;
	}
	return false;
}

/* A counter's fragment: "{}" is its value in its unit's display unit,
 * "{rate}" the bytes counter before it over it (bytes per ns = GB/s). */
static void fragment(struct text *t, const struct hz_stat_row *r, uint64_t v,
		     uint64_t bytes_before)
{
	const char *open = strchr(r->text, '{');
	const char *close = open ? strchr(open, '}') : NULL;

	if (close == NULL) {
		put(t, "%s", r->text);
		return;
	}
	put(t, "%.*s", (int)(open - r->text), r->text);
	if (strncmp(open, "{rate}", 6) == 0)
		put(t, "%.1f", v ? (double)bytes_before / (double)v : 0.0);
	else if (r->unit == HZ_STAT_UNIT_BYTES)
		put(t, "%.1f", mib(v));
	else if (r->unit == HZ_STAT_UNIT_NS)
		put(t, "%.1f", (double)v / 1e6);
	else
		put(t, "%llu", (unsigned long long)v);
	put(t, "%s", close + 1);
}

static void text_arrays(struct text *t, const struct hz_stats *s, const struct hz_stat_row *r)
{
	if (r->kind == HZ_STAT_KIND_BACKINGS) {
		for (unsigned b = 0; b < HZ_BACKING_COUNT; b++)
			put(t, " %s %llu (%.1f MiB)%s", hz_backing_name((enum hz_backing)b),
			    (unsigned long long)value(s, r, b),
			    mib(hz_stats_value(s, r->at2 + b * (unsigned)sizeof(uint64_t))),
			    b + 1 < HZ_BACKING_COUNT ? "," : "");
		return;
	}
	for (unsigned f = 0; f < HZ_FB_COUNT; f++)
		put(t, " %s %llu%s", hz_fallback_name((enum hz_fallback)f),
		    (unsigned long long)value(s, r, f), f + 1 < HZ_FB_COUNT ? "," : "");
}

/* Ends the open line; the folio lines follow the exec counters. */
static void end_line(struct text *t, bool open, int group, int next_group,
		     const struct hz_report_facts *f)
{
	if (open)
		put(t, "\n");
	if (group == HZ_STAT_GROUP_EXEC && next_group != HZ_STAT_GROUP_EXEC && f->folios)
		folio_lines(t);
}

static void text_report(struct text *t, const struct hz_stats *s,
			const struct hz_report_facts *f)
{
	bool open = false, shown = false;
	int group = HZ_STAT_GROUP_CORE;
	uint64_t bytes = 0;

	put(t, "hugezero: stats for pid %d\n", f->pid);
	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];

		if (r->kind == HZ_STAT_KIND_LINE) {
			end_line(t, open, group, r->group, f);
			group = r->group;
			shown = !r->used_only || line_used(s, i);
			open = shown;
			if (shown)
				put(t, "hugezero:   %s", r->key);
			if (shown && group == HZ_STAT_GROUP_EXEC)
				put(t, "mode %s: ", f->exec_mode);
		} else if (shown && r->kind == HZ_STAT_KIND_VALUE) {
			if (r->text != NULL)
				fragment(t, r, value(s, r, 0), bytes);
			if (r->unit == HZ_STAT_UNIT_BYTES)
				bytes = value(s, r, 0);
		} else if (shown) {
			text_arrays(t, s, r);
		}
	}
	end_line(t, open, group, -1, f);
}

/* ---- JSON ---- */

static const char *const group_keys[] = {
	[HZ_STAT_GROUP_EXEC] = "exec",
	[HZ_STAT_GROUP_JEMALLOC] = "jemalloc",
};

struct json {
	struct text *t;
	bool first;  /* nothing in the object yet */
	bool nested; /* inside a group's object */
	bool brk;    /* a line of the report starts: break the JSON line too */
};

static void key(struct json *j, const char *name)
{
	if (!j->first && j->brk)
		put(j->t, ",\n%s", j->nested ? "  " : " ");
	else if (!j->first)
		put(j->t, ", ");
	j->first = j->brk = false;
	put(j->t, "\"%s\": ", name);
}

static void json_line(struct json *j, const struct hz_stat_row *r, int *group,
		      const struct hz_report_facts *f)
{
	j->brk = true;
	if (r->group == *group)
		return;
	if (j->nested)
		put(j->t, "}");
	j->nested = false;
	*group = r->group;
	if (*group == HZ_STAT_GROUP_CORE)
		return;
	key(j, group_keys[*group]);
	put(j->t, "{");
	j->first = j->nested = true;
	if (*group == HZ_STAT_GROUP_EXEC) {
		key(j, "mode");
		put(j->t, "\"%s\"", f->exec_mode);
	}
}

static void json_arrays(struct json *j, const struct hz_stats *s, const struct hz_stat_row *r)
{
	key(j, r->key);
	put(j->t, "{");
	if (r->kind == HZ_STAT_KIND_BACKINGS) {
		for (unsigned b = 0; b < HZ_BACKING_COUNT; b++)
			put(j->t, "\"%s\": {\"count\": %llu, \"bytes\": %llu}%s",
			    hz_backing_name((enum hz_backing)b), (unsigned long long)value(s, r, b),
			    (unsigned long long)hz_stats_value(s, r->at2 + b * (unsigned)sizeof(uint64_t)),
			    b + 1 < HZ_BACKING_COUNT ? ", " : "}");
		return;
	}
	for (unsigned f = 0; f < HZ_FB_COUNT; f++)
		put(j->t, "\"%s\": %llu%s", hz_fallback_name((enum hz_fallback)f),
		    (unsigned long long)value(s, r, f), f + 1 < HZ_FB_COUNT ? ", " : "}");
}

static void json_report(struct text *t, const struct hz_stats *s,
			const struct hz_report_facts *f)
{
	struct json j = { .t = t, .first = true };
	int group = HZ_STAT_GROUP_CORE;

	put(t, "{");
	key(&j, "pid");
	put(t, "%d", f->pid);
	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];

		if (r->kind == HZ_STAT_KIND_LINE) {
			/* The first line goes on with the pid. */
			json_line(&j, r, &group, f);
			j.brk = j.brk && i > 0;
		} else if (r->kind == HZ_STAT_KIND_VALUE) {
			key(&j, r->key);
			put(t, "%llu", (unsigned long long)value(s, r, 0));
		} else {
			json_arrays(&j, s, r);
		}
	}
	put(t, "%s}\n", j.nested ? "}" : "");
}

/* ---- the report ---- */

void hz_report_facts_now(struct hz_report_facts *f)
{
	f->pid = (int)hz_prim_getpid();
	f->exec_mode = hz_exec_mode_name(hz_exec_mode());
	f->folios = true;
}

size_t hz_report_format(enum hz_report_form form, const struct hz_stats *s,
			const struct hz_report_facts *f, char *buf, size_t size)
{
	struct text t = { .buf = buf, .size = size, .len = 0 };

	if (size == 0)
		return 0;
	buf[0] = '\0';
	if (form == HZ_REPORT_JSON)
		json_report(&t, s, f);
	else
		text_report(&t, s, f);
	return t.len;
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

static void write_file(const char *pattern, const char *buf, size_t len)
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
	if (fd == -EEXIST && !strstr(pattern, "%p")) {
		/* Every process under the preload writes one, children and
		 * wrappers too (/usr/bin/time), the first to exit first. */
		hz_warn("stats file %s exists (another process under hugezero may have "
			"written it first): pid %d's stats not written; put %%p in "
			"HUGEZERO_STATS_FILE for one file per process",
			path, (int)hz_prim_getpid());
		return;
	}
	if (fd < 0) {
		hz_warn("cannot create stats file %s (error %d); it must not exist yet",
			path, -fd);
		return;
	}
	hz_prim_write_all(fd, buf, len);
	hz_prim_close(fd);
}

/* 100 and up: out of the way of programs that expect low numbers free. */
#define REPORT_FD_MIN 100
static int report_fd = 2;
/* The file stderr was at start-up, when the copy was made. */
static enum { STDERR_UNSEEN, STDERR_SEEN, STDERR_NONE } stderr_at_start;
static uint64_t stderr_dev, stderr_ino;

void hz_report_keep_stderr(void)
{
	int fd;

	if (!hz_option_u64(HZ_OPT_STATS) || hz_option_str(HZ_OPT_STATS_FILE)[0])
		return;
	if (hz_prim_file_id(2, &stderr_dev, &stderr_ino) != 0) {
		stderr_at_start = STDERR_NONE;
		return;
	}
	stderr_at_start = STDERR_SEEN;
	fd = hz_prim_dup_cloexec(2, REPORT_FD_MIN);
	if (fd >= 0)
		report_fd = fd;
}

/* Where the text report goes at exit: the copy of stderr, or stderr, only
 * while it still holds the file stderr was at start-up. A program may
 * have closed every descriptor above 2 and opened its own file at the
 * copy's number (a daemon's log), or at 2 after closing it: the report
 * must not land there. -1: nowhere. */
static int report_fd_now(void)
{
	if (stderr_at_start == STDERR_UNSEEN) /* no copy made: stats turned on later */
		return 2;
	if (stderr_at_start == STDERR_NONE)
		return -1;
	if (hz_prim_file_is(report_fd, stderr_dev, stderr_ino))
		return report_fd;
	return hz_prim_file_is(2, stderr_dev, stderr_ino) ? 2 : -1;
}

void hz_report_publish(void)
{
	hz_stats_publish(hz_exec_mode_name(hz_exec_mode()));
}

void hz_report_exit(void)
{
	const char *file = hz_option_str(HZ_OPT_STATS_FILE);
	/* static: 8 KiB off a possibly small stack (the report is 2-3 KiB). */
	static char buf[8192];
	static struct hz_stats snapshot;
	struct hz_report_facts f;
	size_t len;

	if (file[0] == '\0' && !hz_option_u64(HZ_OPT_STATS))
		return;
	hz_stats_snapshot(&snapshot);
	hz_report_facts_now(&f);
	if (file[0] != '\0') {
		len = hz_report_format(HZ_REPORT_JSON, &snapshot, &f, buf, sizeof(buf));
		write_file(file, buf, len);
	} else {
		int fd = report_fd_now();

		len = hz_report_format(HZ_REPORT_TEXT, &snapshot, &f, buf, sizeof(buf));
		if (fd >= 0)
			hz_prim_write_all(fd, buf, len);
	}
}
