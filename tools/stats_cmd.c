/* hugezero stats PID: the exit report of a process that is still running.
 *
 * The library keeps a header (src/stats.h) alone in a page-aligned 4 KiB
 * of its .bss: magic, layout, where the counters are and a hash of their
 * table. This finds it through /proc/PID/maps, either by its name
 * ("[anon:hugezero-stats]", where the kernel has CONFIG_ANON_VMA_NAME) or,
 * without names, by its magic at the start of a page of libhugezero's
 * writable mappings and of the anonymous .bss mapping just after them;
 * then it copies header and counters with process_vm_readv, so the kernel's
 * ptrace check decides who may read. The process does nothing for it: no
 * signal, no file, no call. */
#include "stats_cmd.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hugezero.h>

#include "exec/maps.h"
#include "openmetrics.h"
#include "prim/prim.h"
#include "report.h"
#include "stats.h"
#include "textfile.h"

#define EXIT_USAGE 2

/* 64 MiB of address space scanned per candidate mapping at most: the
 * header is within the library's .bss, a few pages in, but an anonymous
 * mapping next to it may have merged with it. */
#define SCAN_MAX ((uint64_t)64 << 20)
#define CANDIDATES_MAX 16

static const char usage_stats[] =
	"usage: hugezero stats [--json] [--watch [SECONDS]] PID\n"
	"       hugezero stats --openmetrics | --textfile DIR [PID]\n"
	"       hugezero stats\n"
	"\n"
	"Prints the report HUGEZERO_STATS=1 prints at exit, for process PID while it\n"
	"runs (without the exec folio lines: see hugezero folios PID). The process\n"
	"does nothing for it: its counters are read from outside with\n"
	"process_vm_readv, so you must be its user or root.\n"
	"\n"
	"  --json             the JSON HUGEZERO_STATS_FILE writes, instead\n"
	"  --watch [SECONDS]  print again every SECONDS (default 1), and after the text\n"
	"                     report what changed since the sample before, per second;\n"
	"                     with --json, one JSON object per sample. Ends with the\n"
	"                     process (exit status 1) or on Ctrl-C.\n"
	"  --openmetrics      the counters for Prometheus, in the OpenMetrics format:\n"
	"                     hugezero_* families in bytes and seconds, counters with\n"
	"                     _total, labelled pid, comm and cgroup; ends with # EOF.\n"
	"                     Without a PID, every hugezero process this user may read\n"
	"                     (the others, and those that exit meanwhile, are left out)\n"
	"  --textfile DIR     the same in the Prometheus text format 0.0.4 (no # EOF),\n"
	"                     which node_exporter's textfile collector reads, written to\n"
	"                     DIR/hugezero.prom: a temporary file renamed over it. An\n"
	"                     error leaves the file as it was.\n"
	"  --help             this text\n"
	"\n"
	"Plain hugezero stats: one line per process that runs hugezero, with its large\n"
	"blocks live now (LIVE_MiB), its cache (CACHE_MiB) and the bytes of the\n"
	"blocks it mapped on huge pages since it started (HUGE_MiB: hugetlb or THP).\n"
	"\n"
	"exit status: 0 success, 2 usage error, 1 no such process, not running\n"
	"hugezero, permission denied, another hugezero version, or the process exited.\n";

struct target {
	pid_t pid;
	struct hz_stats_header header;
};

struct range {
	uint64_t start, end;
};

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int refuse_access(pid_t pid)
{
	if (geteuid() == 0) {
		fprintf(stderr,
			"hugezero stats: permission denied reading process %d, even as root: this\n"
			"process lacks CAP_SYS_PTRACE over it (another user namespace or container,\n"
			"or a security module); run this inside the process's container\n", (int)pid);
		return 1;
	}
	fprintf(stderr,
		"hugezero stats: permission denied reading process %d: the kernel lets only\n"
		"its user (when it is not set-uid or made undumpable) or root read another\n"
		"process's memory (ptrace rules); run this as that user or as root\n", (int)pid);
	return 1;
}

/* The mappings that may hold the header: the named one first, then
 * libhugezero's writable mappings and the anonymous one right after them. */
static int candidates(pid_t pid, struct range *out, unsigned *count)
{
	static struct hz_maps m; /* 8 KiB buffer */
	struct hz_map e;
	uint64_t lib_end = 0;
	unsigned n = 0;
	int ret = hz_maps_open(&m, pid, false);

	if (ret != 0)
		return ret;
	while ((ret = hz_maps_next(&m, &e)) == 1 && n < CANDIDATES_MAX) {
		bool named = strcmp(e.path, "[anon:" HZ_STATS_MAPPING_NAME "]") == 0;
		bool lib = strncmp(base_name(e.path), "libhugezero", 11) == 0;
		bool bss = e.inode == 0 && e.path[0] == '\0' && e.range.start == lib_end;

		if (named && n > 0) { /* the name is sure: look there first */
			out[n] = out[0];
			n++;
			out[0] = (struct range){ e.range.start, e.range.end };
		} else if (named || ((lib || bss) && (e.prot & PROT_WRITE))) {
			out[n++] = (struct range){ e.range.start, e.range.end };
		}
		lib_end = lib ? e.range.end : 0;
	}
	hz_maps_close(&m);
	*count = n;
	return ret < 0 ? ret : 0;
}

/* Whether a header sits at addr; -ESRCH/-EPERM end the search. */
static int header_at(pid_t pid, uint64_t addr, struct hz_stats_header *h)
{
	uint64_t magic;
	int ret = hz_prim_read_process(pid, addr, &magic, sizeof(magic));

	if (ret != 0)
		return ret == -EFAULT ? 0 : ret;
	if (magic != HZ_STATS_MAGIC)
		return 0;
	ret = hz_prim_read_process(pid, addr, h, sizeof(*h));
	if (ret != 0)
		return ret == -EFAULT ? 0 : ret;
	/* self: the magic at a page start by chance is not a header. */
	return h->self == addr;
}

static int find_header(struct target *t)
{
	struct range c[CANDIDATES_MAX];
	unsigned n = 0;
	int ret = candidates(t->pid, c, &n);

	if (ret != 0)
		return ret;
	for (unsigned i = 0; i < n; i++) {
		uint64_t end = c[i].end - c[i].start > SCAN_MAX ? c[i].start + SCAN_MAX : c[i].end;

		for (uint64_t a = c[i].start; a + HZ_STATS_PAGE <= end; a += HZ_STATS_PAGE) {
			ret = header_at(t->pid, a, &t->header);
			if (ret != 0)
				return ret < 0 ? ret : 0;
		}
	}
	return -ENOENT;
}

/* What locate finds besides errno values. */
#define LAYOUT_DIFFERS (-10000) /* another header layout */
#define TABLE_DIFFERS (-10001)  /* another counter table */

/* The header found, checked against this tool's idea of the counters:
 * 0, LAYOUT_DIFFERS, TABLE_DIFFERS, -ENOENT (no header), -ESRCH (no such
 * process, or a zombie), -EACCES or -EPERM, or another errno value. */
static int locate(struct target *t)
{
	int ret = find_header(t);

	if (ret == -ENOENT || ret == -ESRCH) {
		char state = '?';
		int gone = hz_prim_process_state(t->pid, &state);

		if (gone == -ESRCH || (gone == 0 && state == 'Z'))
			return -ESRCH;
	}
	if (ret != 0)
		return ret;
	t->header.version[sizeof(t->header.version) - 1] = '\0';
	t->header.exec_mode[sizeof(t->header.exec_mode) - 1] = '\0';
	if (t->header.layout != HZ_STATS_LAYOUT ||
	    t->header.header_size != sizeof(struct hz_stats_header))
		return LAYOUT_DIFFERS;
	if (t->header.table_hash != hz_stats_table_hash() ||
	    t->header.counters_size != sizeof(struct hz_stats))
		return TABLE_DIFFERS;
	return 0;
}

/* Says why locate failed; returns the exit status. */
static int explain(const struct target *t, int ret)
{
	int pid = (int)t->pid;
	char state = '?';

	if (ret == -ESRCH && hz_prim_process_state(t->pid, &state) == 0 && state == 'Z')
		fprintf(stderr, "hugezero stats: process %d has exited (its parent has not "
			"reaped it yet)\n", pid);
	else if (ret == -ESRCH)
		fprintf(stderr, "hugezero stats: no process %d\n", pid);
	else if (ret == -EACCES || ret == -EPERM)
		return refuse_access(t->pid);
	else if (ret == -ENOENT)
		fprintf(stderr,
			"hugezero stats: process %d does not run hugezero (no hugezero stats in\n"
			"its memory: not started under libhugezero-preload.so, HUGEZERO_DISABLE=1,\n"
			"or a hugezero from before live stats)\n", pid);
	else if (ret == LAYOUT_DIFFERS)
		fprintf(stderr,
			"hugezero stats: process %d runs a hugezero whose stats header has layout %u;\n"
			"this hugezero %s reads layout %u: use the hugezero command of the version\n"
			"the process runs\n", pid, t->header.layout, hz_version(), HZ_STATS_LAYOUT);
	else if (ret == TABLE_DIFFERS)
		fprintf(stderr,
			"hugezero stats: process %d runs hugezero %s, whose counters differ from\n"
			"those of this hugezero %s: use the hugezero command of version %s\n",
			pid, t->header.version, hz_version(), t->header.version);
	else
		fprintf(stderr, "hugezero stats: cannot read process %d: %s\n", pid,
			strerror(-ret));
	return 1;
}

/* The counters now. Each is an aligned 8-byte word that the library
 * updates with single atomic instructions, and the kernel copies aligned
 * words whole (x86-64 and arm64 copy at least 8 bytes at a time from an
 * aligned source), so no counter is torn; counters may be from slightly
 * different instants, as in the exit report. */
static int sample(const struct target *t, struct hz_stats *s)
{
	return hz_prim_read_process(t->pid, t->header.counters, s, sizeof(*s));
}

int hz_stats_find(pid_t pid, struct hz_stats_header *h)
{
	struct target t = { .pid = pid };
	int ret = locate(&t);

	if (ret == LAYOUT_DIFFERS || ret == TABLE_DIFFERS)
		return -EPROTO;
	if (ret == 0)
		*h = t.header;
	return ret;
}

int hz_stats_read(pid_t pid, const struct hz_stats_header *h, struct hz_stats *s)
{
	struct target t = { .pid = pid, .header = *h };
	uint64_t magic = 0;
	int ret = hz_prim_read_process(pid, h->self, &magic, sizeof(magic));

	/* Gone from where it was: the process called exec. */
	if (ret == -EFAULT || (ret == 0 && magic != HZ_STATS_MAGIC))
		return -ENOENT;
	return ret != 0 ? ret : sample(&t, s);
}

static int lost(const struct target *t, int err)
{
	char state = '?';

	if (err == -ESRCH || hz_prim_process_state(t->pid, &state) != 0 || state == 'Z') {
		fprintf(stderr, "hugezero stats: process %d exited\n", (int)t->pid);
		return 1;
	}
	if (err == -EPERM || err == -EACCES)
		return refuse_access(t->pid);
	fprintf(stderr, "hugezero stats: cannot read process %d any more (%s): it called exec\n"
		"or unmapped hugezero\n", (int)t->pid, strerror(-err));
	return 1;
}

static void print_report(const struct target *t, const struct hz_stats *s, bool json)
{
	static char buf[8192];
	struct hz_report_facts f = { .pid = (int)t->pid, .exec_mode = t->header.exec_mode,
				     .folios = false };

	hz_report_format(json ? HZ_REPORT_JSON : HZ_REPORT_TEXT, s, &f, buf, sizeof(buf));
	fputs(buf, stdout);
}

/* ---- --watch: what changed ---- */

static void change(const char *name, const struct hz_stat_row *r, uint64_t was, uint64_t now,
		   double secs, unsigned *shown)
{
	double d = (double)now - (double)was;

	if (now == was)
		return;
	if (*shown == 0)
		printf("hugezero:   in the last %.1f s:\n", secs);
	(*shown)++;
	if (r != NULL && r->unit == HZ_STAT_UNIT_BYTES)
		printf("hugezero:     %-28s %+.1f MiB", name, d / (1 << 20));
	else if (r != NULL && r->unit == HZ_STAT_UNIT_NS)
		printf("hugezero:     %-28s %+.1f ms", name, d / 1e6);
	else
		printf("hugezero:     %-28s %+.0f", name, d);
	/* Rates for what only grows; a gauge's change is the news. */
	if (r == NULL || r->type == HZ_STAT_TYPE_COUNTER) {
		if (r != NULL && r->unit == HZ_STAT_UNIT_BYTES)
			printf(" (%.1f MiB/s)", d / (1 << 20) / secs);
		else if (r != NULL && r->unit == HZ_STAT_UNIT_NS)
			printf(" (%.1f%% of one CPU)", 100.0 * d / 1e9 / secs);
		else
			printf(" (%.1f/s)", d / secs);
	}
	putchar('\n');
}

static void changes(const struct hz_stats *was, const struct hz_stats *now, double secs)
{
	unsigned shown = 0;
	char name[96];

	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];
		unsigned n = r->kind == HZ_STAT_KIND_BACKINGS ? HZ_BACKING_COUNT
			   : r->kind == HZ_STAT_KIND_FALLBACKS ? HZ_FB_COUNT : 1;

		for (unsigned k = 0; k < n && r->kind != HZ_STAT_KIND_LINE; k++) {
			unsigned at = r->at + k * (unsigned)sizeof(uint64_t);

			if (r->kind == HZ_STAT_KIND_VALUE) {
				change(r->key, r, hz_stats_value(was, at), hz_stats_value(now, at),
				       secs, &shown);
				continue;
			}
			snprintf(name, sizeof(name), "%s %s", r->key,
				 r->kind == HZ_STAT_KIND_BACKINGS
					 ? hz_backing_name((enum hz_backing)k)
					 : hz_fallback_name((enum hz_fallback)k));
			change(name, NULL, hz_stats_value(was, at), hz_stats_value(now, at), secs,
			       &shown);
			if (r->kind == HZ_STAT_KIND_BACKINGS) {
				static const struct hz_stat_row bytes = {
					.type = HZ_STAT_TYPE_COUNTER, .unit = HZ_STAT_UNIT_BYTES };

				at = r->at2 + k * (unsigned)sizeof(uint64_t);
				snprintf(name, sizeof(name), "%s %s bytes", r->key,
					 hz_backing_name((enum hz_backing)k));
				change(name, &bytes, hz_stats_value(was, at),
				       hz_stats_value(now, at), secs, &shown);
			}
		}
	}
	if (shown == 0)
		printf("hugezero:   nothing changed in the last %.1f s\n", secs);
}

static int watch(struct target *t, bool json, double seconds)
{
	static struct hz_stats was, now;
	uint64_t then = hz_prim_now_ns();
	bool tty = isatty(STDOUT_FILENO);
	int ret = sample(t, &was);

	if (ret != 0)
		return lost(t, ret);
	print_report(t, &was, json);
	for (;;) {
		uint64_t at;

		fflush(stdout);
		hz_prim_sleep_ns((uint64_t)(seconds * 1e9));
		ret = sample(t, &now);
		if (ret != 0)
			return lost(t, ret);
		at = hz_prim_now_ns();
		if (tty && !json)
			fputs("\033[H\033[J", stdout); /* a screen that refreshes */
		else if (!json)
			putchar('\n');
		print_report(t, &now, json);
		if (!json)
			changes(&was, &now, (double)(at - then) / 1e9);
		was = now;
		then = at;
	}
}

static int parse_pid(const char *arg, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v <= 0 || v > 0x7fffffff)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

/* 1 when arg is a number (*out set), 0 when it is not; -1 when it is a
 * number out of range (said). */
static int parse_seconds(const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (end == arg || *end)
		return 0;
	if (errno || !isfinite(v) || v < 0.01 || v > 86400) {
		fprintf(stderr, "hugezero stats: --watch %s: SECONDS is 0.01 to 86400\n", arg);
		return -1;
	}
	*out = v;
	return 1;
}

/* ---- no PID: the processes that run hugezero ---- */

struct listing {
	pid_t self;
	unsigned shown, denied;
};

static double mib(uint64_t bytes)
{
	return (double)bytes / (1 << 20);
}

static int list_one(pid_t pid, void *arg)
{
	struct listing *l = arg;
	struct target t = { .pid = pid };
	static struct hz_stats s;
	char name[64] = "?";
	uint64_t huge = 0;
	int ret = pid == l->self ? -ENOENT : locate(&t);

	if (ret == -EACCES || ret == -EPERM)
		l->denied++;
	if (ret != 0 && ret != LAYOUT_DIFFERS && ret != TABLE_DIFFERS)
		return 0;
	hz_prim_process_name(pid, name, sizeof(name));
	if (l->shown++ == 0)
		printf("%8s %10s %10s %10s  %s\n", "PID", "LIVE_MiB", "CACHE_MiB", "HUGE_MiB",
		       "COMMAND");
	if (ret != 0 || sample(&t, &s) != 0) {
		printf("%8d %10s %10s %10s  %s (hugezero %s: another version)\n", (int)pid, "-",
		       "-", "-", name, ret == TABLE_DIFFERS ? t.header.version : "?");
		return 0;
	}
	for (unsigned b = 0; b < HZ_BACKING_COUNT; b++)
		huge += b == HZ_BACKING_SMALL ? 0 : s.bytes[b];
	printf("%8d %10.1f %10.1f %10.1f  %s\n", (int)pid, mib(s.live_bytes),
	       mib(s.cache_bytes), mib(huge), name);
	return 0;
}

static int list_processes(void)
{
	struct listing l = { .self = getpid() };
	int ret = hz_prim_each_process(list_one, &l);

	if (ret < 0) {
		fprintf(stderr, "hugezero stats: cannot list /proc: %s\n", strerror(-ret));
		return 1;
	}
	if (l.shown == 0)
		printf("no process%s runs hugezero\n", l.denied ? " you may read" : "");
	if (l.denied)
		fprintf(stderr, "hugezero stats: skipped %u process%s this user may not read%s\n",
			l.denied, l.denied == 1 ? "" : "es",
			geteuid() == 0 ? "" : " (root may)");
	return 0;
}

/* ---- --openmetrics and --textfile ---- */

static int metrics_one(pid_t pid, void *arg)
{
	struct hz_metrics *m = arg;
	struct target t = { .pid = pid };
	static struct hz_stats s;

	/* A scrape must not fail for one process: those of another user or
	 * version, and those that exit mid-scan, are left out. */
	if (pid == getpid() || locate(&t) != 0 || sample(&t, &s) != 0)
		return 0;
	return hz_metrics_add(m, (int)pid, &t.header, &s);
}

/* Into m: process t, or with no PID every one. Returns the exit status,
 * having said what went wrong. */
static int collect(struct target *t, bool have_pid, struct hz_metrics *m)
{
	static struct hz_stats s;
	int ret;

	if (!have_pid) {
		ret = hz_prim_each_process(metrics_one, m);
	} else {
		ret = locate(t);
		if (ret != 0)
			return explain(t, ret);
		ret = sample(t, &s);
		if (ret != 0)
			return lost(t, ret);
		ret = hz_metrics_add(m, (int)t->pid, &t->header, &s);
	}
	if (ret < 0)
		fprintf(stderr, "hugezero stats: cannot read the processes: %s\n", strerror(-ret));
	return ret < 0;
}

/* To stdout as OpenMetrics, or into DIR/hugezero.prom as Prometheus text. */
static int metrics(struct target *t, bool have_pid, const char *dir)
{
	struct hz_metrics m = { 0 };
	struct hz_textfile f = { .out = NULL };
	int status, ret;

	if (dir != NULL && hz_textfile_open(&f, dir, "hugezero.prom") != 0)
		return 1;
	status = collect(t, have_pid, &m);
	if (status == 0) {
		ret = hz_metrics_write(dir ? f.out : stdout, &m,
				       dir ? HZ_METRICS_PROMETHEUS : HZ_METRICS_OPENMETRICS);
		if (ret != 0)
			fprintf(stderr, "hugezero stats: cannot write the metrics: %s\n",
				strerror(-ret));
		status = ret != 0;
	}
	hz_metrics_free(&m);
	if (dir != NULL && status == 0)
		return hz_textfile_commit(&f) != 0;
	if (dir != NULL)
		hz_textfile_abandon(&f);
	return status;
}

/* What the command line asks for. */
struct stats_args {
	struct target t;
	bool json, watching, have_pid, openmetrics;
	const char *textfile;
	double seconds;
};

/* Returns -1 to go on, else the exit status (--help, a usage error). */
static int parse_stats_args(int argc, char **argv, struct stats_args *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage_stats, stdout);
			return 0;
		} else if (strcmp(a, "--json") == 0) {
			o->json = true;
		} else if (strcmp(a, "--openmetrics") == 0) {
			o->openmetrics = true;
		} else if (strcmp(a, "--textfile") == 0 && i + 1 < argc) {
			o->textfile = argv[++i];
		} else if (strcmp(a, "--watch") == 0) {
			o->watching = true;
			/* SECONDS is optional: a number that is not the last
			 * argument (which is the PID). */
			if (i + 2 < argc || (i + 1 < argc && o->have_pid)) {
				int n = parse_seconds(argv[i + 1], &o->seconds);

				if (n < 0)
					return EXIT_USAGE;
				i += n;
			}
		} else if (a[0] != '-' && !o->have_pid && parse_pid(a, &o->t.pid) == 0) {
			o->have_pid = true;
		} else {
			fprintf(stderr, "hugezero stats: unexpected argument '%s'\n%s", a,
				usage_stats);
			return EXIT_USAGE;
		}
	}
	return -1;
}

int hz_cmd_stats(int argc, char **argv)
{
	struct stats_args o = { .t = { 0 }, .seconds = 1.0 };
	static struct hz_stats s;
	int ret = parse_stats_args(argc, argv, &o);

	if (ret >= 0)
		return ret;
	if ((o.openmetrics || o.textfile) &&
	    (o.json || o.watching || (o.openmetrics && o.textfile))) {
		fprintf(stderr, "hugezero stats: --openmetrics and --textfile go alone (with a PID "
			"or none)\n%s", usage_stats);
		return EXIT_USAGE;
	}
	if (o.openmetrics || o.textfile)
		return metrics(&o.t, o.have_pid, o.textfile);
	if (!o.have_pid && (o.json || o.watching)) {
		fprintf(stderr, "hugezero stats: --json and --watch need a PID\n%s", usage_stats);
		return EXIT_USAGE;
	}
	if (!o.have_pid)
		return list_processes();
	ret = locate(&o.t);
	if (ret != 0)
		return explain(&o.t, ret);
	if (o.watching)
		return watch(&o.t, o.json, o.seconds);
	ret = sample(&o.t, &s);
	if (ret != 0)
		return lost(&o.t, ret);
	print_report(&o.t, &s, o.json);
	return 0;
}
