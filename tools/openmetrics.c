/* The counters as metric families. See openmetrics.h.
 *
 * Names follow the Prometheus conventions from the table alone: the
 * hugezero_ prefix, exec_ or jemalloc_ for those groups, the JSON key, base
 * units (a BYTES key ends in _bytes; an NS key's _ns becomes _seconds and
 * its value is divided by 10^9), _total on the samples of COUNTER rows;
 * GAUGE and PEAK rows are gauges (a high-water mark is not a rate). HELP is
 * the row's doc. So a new row in stats.def is a new family here too. */
#include "openmetrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backing.h"
#include "prim/prim.h"

/* A cgroup path is cut to this (a label value, not a key to anything). */
#define CGROUP_MAX 1024

struct family {
	char name[128];   /* hugezero_calloc_bytes */
	const char *type; /* "counter", "gauge" or "info" */
	const char *unit; /* "bytes", "seconds" or "" */
	const char *help_prefix;
	const char *help;
	bool ns;          /* values are ns, written as seconds */
};

/* ---- label values and HELP text ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if none. A
 * comm is cut at 15 bytes, which can split a character; both formats
 * require UTF-8. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	/* The second byte's range per lead byte excludes overlong forms and
	 * surrogates (RFC 3629 section 4). */
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3
		   : s[0] < 0xf5 ? 4 : 0;

	if (len > n)
		return 0;
	if (len <= 1)
		return len;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* in escaped into out (always NUL-terminated, cut at a whole character):
 * backslash and newline, and double quotes when quotes (label values, and
 * HELP in OpenMetrics; Prometheus 0.0.4 HELP keeps quotes as they are).
 * Bytes that are not UTF-8 become '?'. */
static void escape(char *out, size_t size, const char *in, bool quotes)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t left = strlen(in), o = 0;

	while (left > 0) {
		size_t n = utf8_len(p, left);
		bool esc = n == 1 && (*p == '\\' || *p == '\n' || (quotes && *p == '"'));
		size_t need = n == 0 ? 1 : esc ? 2 : n;

		if (o + need >= size)
			break;
		if (n == 0) {
			out[o] = '?';
		} else if (esc) {
			out[o] = '\\';
			out[o + 1] = *p == '\n' ? 'n' : (char)*p;
		} else {
			memcpy(out + o, p, n);
		}
		o += need;
		p += n ? n : 1;
		left -= n ? n : 1;
	}
	out[o] = '\0';
}

/* The process's cgroup: the cgroup v2 path (the "0::" line), else the
 * name=systemd hierarchy's (cgroup v1). "" when there is neither. */
static void read_cgroup(int pid, char *out, size_t size)
{
	/* 8 KiB: a dozen cgroup v1 hierarchies with container-length paths. */
	char path[40], buf[8192];
	const char *line;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	if (hz_prim_read_file(path, buf, sizeof(buf)) <= 0)
		return;
	line = strncmp(buf, "0::", 3) == 0 ? buf : strstr(buf, "\n0::");
	if (line == NULL)
		line = strstr(buf, ":name=systemd:");
	if (line == NULL)
		return;
	line = strchr(line + 1, ':');
	line = line ? strchr(line + 1, ':') : NULL;
	if (line != NULL)
		snprintf(out, size, "%.*s", (int)strcspn(line + 1, "\n"), line + 1);
}

int hz_metrics_add(struct hz_metrics *m, int pid, const struct hz_stats_header *h,
		   const struct hz_stats *s)
{
	char comm[64], cgroup[CGROUP_MAX], comm_esc[2 * 64], cgroup_esc[2 * CGROUP_MAX];
	struct hz_metrics_process *p;

	if (m->count == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		struct hz_metrics_process *more = realloc(m->procs, cap * sizeof(*more));

		if (more == NULL)
			return -ENOMEM;
		m->procs = more;
		m->cap = cap;
	}
	p = &m->procs[m->count++];
	snprintf(comm, sizeof(comm), "?");
	hz_prim_process_name(pid, comm, sizeof(comm));
	read_cgroup(pid, cgroup, sizeof(cgroup));
	escape(comm_esc, sizeof(comm_esc), comm, true);
	escape(cgroup_esc, sizeof(cgroup_esc), cgroup, true);
	snprintf(p->labels, sizeof(p->labels), "pid=\"%d\",comm=\"%s\"%s%s%s", pid, comm_esc,
		 cgroup[0] ? ",cgroup=\"" : "", cgroup_esc, cgroup[0] ? "\"" : "");
	escape(p->version, sizeof(p->version), h->version, true);
	escape(p->exec_mode, sizeof(p->exec_mode), h->exec_mode, true);
	p->stats = *s;
	return 0;
}

void hz_metrics_free(struct hz_metrics *m)
{
	free(m->procs);
	*m = (struct hz_metrics){ 0 };
}

/* ---- families ---- */

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* A family named after key, in the row's group, with its unit's suffix. */
static void name_family(struct family *f, int group, const char *key, int unit)
{
	static const char *const groups[] = {
		[HZ_STAT_GROUP_CORE] = "",
		[HZ_STAT_GROUP_EXEC] = "exec_",
		[HZ_STAT_GROUP_JEMALLOC] = "jemalloc_",
	};
	size_t len = strlen(key);
	const char *suffix = "";

	f->unit = "";
	f->ns = unit == HZ_STAT_UNIT_NS;
	if (f->ns) {
		len -= ends_with(key, len, "_ns") ? 3 : 0;
		suffix = "_seconds";
		f->unit = "seconds";
	} else if (unit == HZ_STAT_UNIT_BYTES) {
		suffix = ends_with(key, len, "_bytes") ? "" : "_bytes";
		f->unit = "bytes";
	}
	snprintf(f->name, sizeof(f->name), "hugezero_%s%.*s%s", groups[group], (int)len, key,
		 suffix);
}

/* The sample's name: the family's and the suffix its type requires. */
static const char *sample_suffix(const struct family *f)
{
	return strcmp(f->type, "counter") == 0 ? "_total"
	       : strcmp(f->type, "info") == 0 ? "_info" : "";
}

static void header(FILE *out, const struct family *f, enum hz_metrics_form form)
{
	char help[512], text[512];

	snprintf(text, sizeof(text), "%s%s", f->help_prefix ? f->help_prefix : "", f->help);
	escape(help, sizeof(help), text, form == HZ_METRICS_OPENMETRICS);
	if (form == HZ_METRICS_OPENMETRICS) {
		fprintf(out, "# TYPE %s %s\n", f->name, f->type);
		if (f->unit[0])
			fprintf(out, "# UNIT %s %s\n", f->name, f->unit);
		fprintf(out, "# HELP %s %s\n", f->name, help);
		return;
	}
	/* 0.0.4 has no info type and names the sample, not the family. */
	fprintf(out, "# HELP %s%s %s\n", f->name, sample_suffix(f), help);
	fprintf(out, "# TYPE %s%s %s\n", f->name, sample_suffix(f),
		strcmp(f->type, "info") == 0 ? "gauge" : f->type);
}

/* One sample line; extra is "" or more labels, each with its comma. */
static void sample(FILE *out, const struct family *f, const struct hz_metrics_process *p,
		   const char *extra, uint64_t v)
{
	fprintf(out, "%s%s{%s%s} ", f->name, sample_suffix(f), p->labels, extra);
	/* Exact: ns as seconds with nine decimals, never through a double. */
	if (f->ns)
		fprintf(out, "%llu.%09llu\n", (unsigned long long)(v / 1000000000u),
			(unsigned long long)(v % 1000000000u));
	else
		fprintf(out, "%llu\n", (unsigned long long)v);
}

/* The version and HUGEZERO_EXEC mode each process runs, as labels of 1. */
static void info_family(FILE *out, const struct hz_metrics *m, enum hz_metrics_form form)
{
	struct family f = { .name = "hugezero", .type = "info", .unit = "",
			    .help = "the hugezero version and HUGEZERO_EXEC mode the process runs" };
	char extra[128];

	header(out, &f, form);
	for (size_t i = 0; i < m->count; i++) {
		snprintf(extra, sizeof(extra), ",version=\"%s\",exec_mode=\"%s\"",
			 m->procs[i].version, m->procs[i].exec_mode);
		sample(out, &f, &m->procs[i], extra, 1);
	}
}

/* A family of one array of counters (at, n of them) with one label. */
static void array_family(FILE *out, const struct hz_metrics *m, enum hz_metrics_form form,
			 const struct family *f, unsigned at, unsigned n, bool backings)
{
	char extra[96];

	header(out, f, form);
	for (size_t i = 0; i < m->count; i++)
		for (unsigned k = 0; k < n; k++) {
			snprintf(extra, sizeof(extra), backings ? ",backing=\"%s\"" : ",reason=\"%s\"",
				 backings ? hz_backing_name((enum hz_backing)k)
					  : hz_fallback_name((enum hz_fallback)k));
			sample(out, f, &m->procs[i], extra,
			       hz_stats_value(&m->procs[i].stats, at + k * (unsigned)sizeof(uint64_t)));
		}
}

/* The family or families of one row of the table. */
static void row_families(FILE *out, const struct hz_metrics *m, enum hz_metrics_form form,
			 const struct hz_stat_row *r)
{
	struct family f = { .type = "counter", .help = r->doc };

	if (r->kind == HZ_STAT_KIND_VALUE) {
		name_family(&f, r->group, r->key, r->unit);
		f.type = r->type == HZ_STAT_TYPE_COUNTER ? "counter" : "gauge";
		header(out, &f, form);
		for (size_t i = 0; i < m->count; i++)
			sample(out, &f, &m->procs[i], "", hz_stats_value(&m->procs[i].stats, r->at));
	} else if (r->kind == HZ_STAT_KIND_BACKINGS) {
		name_family(&f, r->group, r->key, HZ_STAT_UNIT_COUNT);
		array_family(out, m, form, &f, r->at, HZ_BACKING_COUNT, true);
		/* The bytes array: the same doc, of the bytes. */
		name_family(&f, r->group, r->key, HZ_STAT_UNIT_BYTES);
		f.help_prefix = "bytes of the ";
		array_family(out, m, form, &f, r->at2, HZ_BACKING_COUNT, true);
	} else if (r->kind == HZ_STAT_KIND_FALLBACKS) {
		name_family(&f, r->group, r->key, HZ_STAT_UNIT_COUNT);
		array_family(out, m, form, &f, r->at, HZ_FB_COUNT, false);
	}
}

int hz_metrics_write(FILE *out, const struct hz_metrics *m, enum hz_metrics_form form)
{
	/* No process, no family: a family without samples says nothing, and
	 * a scrape of an empty file is a success. */
	if (m->count > 0) {
		info_family(out, m, form);
		for (unsigned i = 0; i < hz_stat_row_count; i++)
			row_families(out, m, form, &hz_stat_rows[i]);
	}
	if (form == HZ_METRICS_OPENMETRICS)
		fputs("# EOF\n", out);
	errno = 0;
	if (fflush(out) != 0 || ferror(out))
		return errno ? -errno : -EIO;
	return 0;
}
