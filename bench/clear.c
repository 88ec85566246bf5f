/* bench-clear: bandwidth of hz_clear, of every clearing kernel this CPU
 * runs, and of the C library's memset, on pre-faulted huge-page memory; and
 * what each leaves in the cache for the first reads after it.
 *
 * Bandwidth: for each extent, a buffer of --buffer bytes (2 GiB) is cleared
 * as consecutive extents of that size, so every extent starts cold, as a
 * fresh page does at a fault (clearing one small extent again and again would
 * measure L1/L2 bandwidth, not clearing). Before each sample a buffer of
 * twice the LLC is written, so the caches hold other dirty data, as in a
 * running program: cached stores then pay for the write-backs of what they
 * displace, and a walk cannot leave its own last LLC's worth unwritten and
 * uncharged (up to 15% of a 2 GiB walk here). One sample is one walk of the
 * buffer, timed in the thread's CPU time so that a busy machine's other
 * tasks on this CPU are not counted (the wall/CPU ratio is reported). Rounds
 * run the methods interleaved (ABC ABC ...); the tables give the median and
 * min-max over rounds.
 *
 * First touch: a 2 MiB and a 32 MiB extent are flushed from the cache and the
 * same unrelated buffer is written; then the extent is cleared
 * (timed) and its first 16 KiB and first 256 KiB are read (timed with the
 * TSC). A repetition during which the thread was preempted is taken again.
 *
 * Output: rows in CSV (--csv, default bench/out/clear.csv) and on stdout a
 * table, a one-line summary of ratios and the targets. */
#include <errno.h>
#include <getopt.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <hugezero.h>

#include "util.h"

#ifndef BENCH_OUT_DIR
#define BENCH_OUT_DIR "bench/out"
#endif

#define MAX_METHODS 16
#define MAX_EXTENTS 32
#define MAX_ROUNDS 101

enum kind {
	HZ_NULL,  /* hz_clear(p, n, NULL): automatic policy, no hint */
	HZ_START, /* hz_clear(p, n, p): hint = start, as calloc passes */
	LIBC,     /* memset(p, 0, n), called directly */
	KERNEL,   /* one kernel for the whole extent, one fence */
};

struct method {
	char name[40];
	enum kind kind;
	const char *kernel; /* KERNEL only */
	int nontemporal;
};

struct config {
	int quick;
	const char *csv;
	unsigned rounds;
	size_t buf_len;
	size_t extents[MAX_EXTENTS];
	unsigned n_ext;
	unsigned ft_reps;      /* 0: no first-touch measurement */
	size_t evict_len;
	int cpu;
	int forced;            /* kernels forced into hz_clear, not hz_clear_with */
	int hot;               /* clear the same extent again and again */
};

static const size_t full_extents[] = {
	4u << 10, 64u << 10, 256u << 10, 1u << 20, 2u << 20, 8u << 20,
	16u << 20, 28u << 20, 32u << 20, 64u << 20, 128u << 20, 512u << 20,
	1u << 30,
};
static const size_t quick_extents[] = {
	4u << 10, 64u << 10, 2u << 20, 128u << 20,
};
/* First-touch extents: one huge page, and an extent past the 28 MiB end of
 * target (a) that no private cache can hold. */
static const size_t ft_extents[] = { 2u << 20, 32u << 20 };
#define FT_N (sizeof ft_extents / sizeof ft_extents[0])
#define FT_MAX 8 /* first-touch methods per extent */
#define FT_READ_SMALL (16u << 10)
#define FT_READ_LARGE (256u << 10)

static struct method methods[MAX_METHODS];
static unsigned n_methods;
static const char *env_kernel; /* HUGEZERO_CLEAR, restored for hz_clear */

/* samples[m][e][r] in GB/s; busy[m][e][r] is wall time / CPU time. */
static double samples[MAX_METHODS][MAX_EXTENTS][MAX_ROUNDS];
static double busy[MAX_METHODS][MAX_EXTENTS][MAX_ROUNDS];
static struct bench_stat bw[MAX_METHODS][MAX_EXTENTS];
static struct bench_stat busy_all;      /* over every bandwidth sample */
static unsigned ft_retaken, ft_kept_preempted;

static volatile uint64_t sink;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-clear [--quick] [--csv PATH] [--rounds N] [--buffer SIZE]\n"
		"                   [--extents 4K,64K,...] [--first-touch-reps N]\n"
		"                   [--evict SIZE] [--cpu N] [--forced] [--hot]\n"
		"  --quick            4 extents, 3 rounds, 256M buffer, 5 first-touch\n"
		"                     repetitions (< 15 s)\n"
		"  --csv PATH         CSV rows (default " BENCH_OUT_DIR "/clear.csv)\n"
		"  --rounds N         interleaved rounds (default 9)\n"
		"  --buffer SIZE      buffer walked per sample (default 2G)\n"
		"  --extents LIST     comma-separated extents (default the full set)\n"
		"  --first-touch-reps N  repetitions of the first-touch test, 0 = skip\n"
		"  --evict SIZE       buffer written before every sample (default 2x LLC,\n"
		"                     --quick 1x)\n"
		"  --cpu N            pin to CPU N (default the highest allowed)\n"
		"  --forced           time kernels through hz_clear with hz_clear_set_kernel\n"
		"                     (hz_clear's call overhead) instead of hz_clear_with\n"
		"  --hot              clear the buffer's first extent again and again instead\n"
		"                     of walking the buffer: cache bandwidth for small extents,\n"
		"                     what non-temporal stores cost on cache-hot memory\n");
}

static size_t llc_bytes(void)
{
	size_t best = 0;

	for (int i = 0; i < 8; i++) {
		char path[128], buf[64];
		FILE *f;
		size_t v;

		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(buf, sizeof buf, f) && (v = bench_parse_size(buf)) > best)
			best = v;
		fclose(f);
	}
	return best;
}

static void parse_extents(struct config *c, char *list)
{
	c->n_ext = 0;
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		size_t v = bench_parse_size(tok);

		if (v == 0 || v % 64 || c->n_ext == MAX_EXTENTS) {
			fprintf(stderr, "bench-clear: bad extent '%s' (multiples of 64 bytes, at most %d)\n",
				tok, MAX_EXTENTS);
			exit(2);
		}
		c->extents[c->n_ext++] = v;
	}
}

static void parse_args(struct config *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "csv", required_argument, NULL, 'o' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "extents", required_argument, NULL, 'e' },
		{ "first-touch-reps", required_argument, NULL, 'f' },
		{ "evict", required_argument, NULL, 'v' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "forced", no_argument, NULL, 'w' },
		{ "hot", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *extents = NULL;
	long rounds = -1, reps = -1;
	size_t buf_len = 0, evict = 0;
	int o;

	memset(c, 0, sizeof *c);
	c->csv = BENCH_OUT_DIR "/clear.csv";
	c->cpu = -1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'q': c->quick = 1; break;
		case 'o': c->csv = optarg; break;
		case 'r': rounds = strtol(optarg, NULL, 10); break;
		case 'b': buf_len = bench_parse_size(optarg); break;
		case 'e': extents = optarg; break;
		case 'f': reps = strtol(optarg, NULL, 10); break;
		case 'v': evict = bench_parse_size(optarg); break;
		case 'c': c->cpu = atoi(optarg); break;
		case 'w': c->forced = 1; break;
		case 'H': c->hot = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		usage(stderr);
		exit(2);
	}
	c->rounds = c->quick ? 3 : 9;
	c->buf_len = c->quick ? 256u << 20 : (size_t)2 << 30;
	c->ft_reps = c->quick ? 5 : 21;
	if (c->quick) {
		memcpy(c->extents, quick_extents, sizeof quick_extents);
		c->n_ext = sizeof quick_extents / sizeof quick_extents[0];
	} else {
		memcpy(c->extents, full_extents, sizeof full_extents);
		c->n_ext = sizeof full_extents / sizeof full_extents[0];
	}
	if (extents)
		parse_extents(c, extents);
	if (rounds >= 0)
		c->rounds = (unsigned)rounds;
	if (reps >= 0)
		c->ft_reps = (unsigned)reps;
	if (buf_len)
		c->buf_len = buf_len;
	if (c->rounds < 1 || c->rounds > MAX_ROUNDS || c->ft_reps > MAX_ROUNDS) {
		fprintf(stderr, "bench-clear: rounds and repetitions are 1..%d\n", MAX_ROUNDS);
		exit(2);
	}
	for (unsigned e = 0; e < c->n_ext; e++)
		if (c->extents[e] > c->buf_len) {
			fprintf(stderr, "bench-clear: extent %zu is larger than the buffer\n",
				c->extents[e]);
			exit(2);
		}
	/* Twice the LLC: with an adaptive replacement policy one pass of the
	 * LLC's size does not replace everything. --quick makes do with one
	 * LLC's worth to stay under 15 s. */
	c->evict_len = evict ? evict : (c->quick ? 1 : 2) * llc_bytes();
	if (c->evict_len < (64u << 20))
		c->evict_len = 64u << 20;
}

static void add_method(const char *name, enum kind kind, const char *kernel, int nt)
{
	struct method *m = &methods[n_methods++];

	snprintf(m->name, sizeof m->name, "%s", name);
	m->kind = kind;
	m->kernel = kernel;
	m->nontemporal = nt;
}

static void list_methods(FILE *out)
{
	add_method("hz_clear", HZ_NULL, NULL, 0);
	add_method("hz_clear_hint", HZ_START, NULL, 0);
	add_method("memset", LIBC, NULL, 0);
	for (unsigned i = 0; i < hz_clear_kernel_count(); i++) {
		const char *why;
		char name[40];

		if (!hz_clear_kernel_supported(i, &why)) {
			fprintf(out, "kernel %s: not measured, %s\n", hz_clear_kernel_name(i), why);
			continue;
		}
		if (n_methods == MAX_METHODS)
			break;
		snprintf(name, sizeof name, "kernel:%s", hz_clear_kernel_name(i));
		add_method(name, KERNEL, hz_clear_kernel_name(i), hz_clear_kernel_nontemporal(i));
	}
}

/* The automatic policy, or whatever HUGEZERO_CLEAR forces, for hz_clear. */
static void policy_restore(void)
{
	if (hz_clear_set_kernel(env_kernel) != 0)
		hz_clear_set_kernel(NULL);
}

static void policy_for(const struct config *c, const struct method *m)
{
	if (m->kind == KERNEL && c->forced)
		hz_clear_set_kernel(m->kernel);
	else
		policy_restore();
}

/* Clear one extent. Kernels go through hz_clear_with: one pass, one fence,
 * and a lookup by name that costs a few ns less than hz_clear's policy load
 * and plan (18 ns a call, measured hot at 64 bytes), so the comparison does
 * not flatter hz_clear. --forced uses hz_clear with the kernel forced: one
 * pass of it and one fence, with hz_clear's own call overhead. */
static inline void clear_one(const struct config *c, const struct method *m,
			     char *p, size_t len)
{
	switch (m->kind) {
	case HZ_NULL:
		hz_clear(p, len, NULL);
		break;
	case HZ_START:
		hz_clear(p, len, p);
		break;
	case LIBC:
		memset(p, 0, len);
		break;
	case KERNEL:
		if (c->forced)
			hz_clear(p, len, NULL);
		else
			hz_clear_with(m->kernel, p, len);
		break;
	}
}

/* One sample: clear buf as consecutive extents of ext bytes. Returns GB/s
 * over the thread's CPU time, so a walk that shares its CPU with another
 * task (a build, a test run) is not charged for the other task's slices;
 * *wall_per_cpu says how much it shared (1.00: not at all). Bandwidth taken
 * by tasks on other CPUs still counts against it, as on any shared box. */
static double walk(const struct config *c, const struct method *m,
		   const struct bench_buf *b, const struct bench_buf *ev, size_t ext,
		   double *wall_per_cpu)
{
	size_t count = b->len / ext;
	uint64_t t0, t1, c0, c1;

	if (ev)
		bench_dirty(ev->p, ev->len);
	policy_for(c, m);
	t0 = bench_now_ns();
	c0 = bench_cpu_ns();
	for (size_t i = 0; i < count; i++)
		clear_one(c, m, b->p + (c->hot ? 0 : i * ext), ext);
	c1 = bench_cpu_ns();
	t1 = bench_now_ns();
	*wall_per_cpu = (double)(t1 - t0) / (double)(c1 - c0);
	return (double)(count * ext) / (double)(c1 - c0);
}

static void run_bandwidth(const struct config *c, const struct bench_buf *b,
			  const struct bench_buf *ev)
{
	static double all[MAX_METHODS * MAX_EXTENTS * MAX_ROUNDS];
	size_t n_all = 0;
	double ignored;

	/* Untimed: the policy's first load, lazy binding, code into the cache. */
	for (unsigned m = 0; m < n_methods; m++) {
		struct bench_buf part = { b->p, b->len < (256u << 20) ? b->len : 256u << 20 };

		walk(c, &methods[m], &part, NULL, 2u << 20, &ignored);
	}
	for (unsigned r = 0; r < c->rounds; r++) {
		uint64_t t0 = bench_now_ns();
		double worst = 0;

		for (unsigned e = 0; e < c->n_ext; e++)
			for (unsigned m = 0; m < n_methods; m++) {
				samples[m][e][r] = walk(c, &methods[m], b, c->hot ? NULL : ev,
							c->extents[e], &busy[m][e][r]);
				all[n_all++] = busy[m][e][r];
				if (busy[m][e][r] > worst)
					worst = busy[m][e][r];
			}
		fprintf(stderr, "bench-clear: round %u/%u done in %.1f s (wall/CPU up to %.2f)\n",
			r + 1, c->rounds, (double)(bench_now_ns() - t0) / 1e9, worst);
	}
	busy_all = bench_stat_of(all, n_all);
	policy_restore();
	for (unsigned m = 0; m < n_methods; m++)
		for (unsigned e = 0; e < c->n_ext; e++) {
			double v[MAX_ROUNDS];

			memcpy(v, samples[m][e], c->rounds * sizeof v[0]);
			bw[m][e] = bench_stat_of(v, c->rounds);
		}
}

static int method_index(const char *name)
{
	for (unsigned m = 0; m < n_methods; m++)
		if (strcmp(methods[m].name, name) == 0)
			return (int)m;
	return -1;
}

/* The kernel method with the highest median at extent e. */
static int best_kernel(unsigned e, int nontemporal_only)
{
	int best = -1;

	for (unsigned m = 0; m < n_methods; m++) {
		if (methods[m].kind != KERNEL || (nontemporal_only && !methods[m].nontemporal))
			continue;
		if (best < 0 || bw[m][e].median > bw[best][e].median)
			best = (int)m;
	}
	return best;
}

/* Per-round ratios a/b: interleaving makes each round's pair comparable even
 * when the machine's speed drifts between rounds. */
static struct bench_stat paired(const double *a, const double *b, size_t n)
{
	double v[MAX_ROUNDS];

	for (size_t i = 0; i < n; i++)
		v[i] = a[i] / b[i];
	return bench_stat_of(v, n);
}

/* ---- first touch ------------------------------------------------------- */

enum ft_kind {
	FT_HZ,     /* hz_clear(p, len, p) */
	FT_MEMSET, /* memset(p, 0, len) */
	FT_NT,     /* one non-temporal kernel for all of it */
	FT_SPLIT,  /* hz_clear's order by hand: the NT kernel right of the
		    * neighbourhood, then a chosen cached kernel on it */
};

struct ft_result {
	char name[48];
	enum ft_kind kind;
	const char *kernel;     /* FT_NT, FT_SPLIT: the non-temporal kernel */
	const char *hot_kernel; /* FT_SPLIT: the cached kernel for the neighbourhood */
	double clear_ns[MAX_ROUNDS], read_small_ns[MAX_ROUNDS], read_large_ns[MAX_ROUNDS];
	struct bench_stat clear, read_small, read_large;
};

static struct ft_result ft[FT_N][FT_MAX];
static unsigned ft_count; /* methods per extent; 0 and 1 are hz_clear and memset */

static void flush_range(const char *p, size_t len)
{
#if defined(__x86_64__)
	for (size_t off = 0; off < len; off += 64)
		_mm_clflush(p + off);
	_mm_mfence();
#else
	(void)p;
	(void)len;
#endif
}

/* The non-temporal kernel for plain NT clearing of len bytes: the fastest at
 * that extent in the bandwidth run, else the one auto uses for long passes. */
static const char *nt_kernel_for(const struct config *c, size_t len)
{
	for (unsigned e = 0; e < c->n_ext; e++)
		if (c->extents[e] == len) {
			int k = best_kernel(e, 1);

			if (k >= 0)
				return methods[k].kernel;
		}
	for (unsigned m = 0; m < n_methods; m++)
		if (methods[m].kind == KERNEL && methods[m].nontemporal &&
		    strcmp(methods[m].kernel, hz_clear_kernel_for((size_t)1 << 30)) == 0)
			return methods[m].kernel;
	for (unsigned m = 0; m < n_methods; m++)
		if (methods[m].kind == KERNEL && methods[m].nontemporal)
			return methods[m].kernel;
	return NULL;
}

/* The neighbourhood hz_clear keeps hot for hint = start: 2R + 1 pages of
 * 4 KiB, R from HUGEZERO_CLEAR_RADIUS (default 2, as in src/options.def). */
static size_t hot_bytes(void)
{
	const char *r = getenv("HUGEZERO_CLEAR_RADIUS");
	long radius = r && *r ? strtol(r, NULL, 10) : 2;

	if (radius < 0 || radius > 64)
		radius = 2;
	return (size_t)(2 * radius + 1) * 4096;
}

static void ft_add(unsigned x, enum ft_kind kind, const char *name, const char *kernel,
		   const char *hot_kernel)
{
	struct ft_result *f = &ft[x][ft_count++];

	f->kind = kind;
	f->kernel = kernel;
	f->hot_kernel = hot_kernel;
	if (kind == FT_SPLIT)
		snprintf(f->name, sizeof f->name, "nt_then_hot:%s", hot_kernel);
	else
		snprintf(f->name, sizeof f->name, "%s", name);
}

/* Methods per extent. The FT_SPLIT ones say which cached kernel is best for
 * the neighbourhood; --quick leaves them out. */
static void ft_methods(const struct config *c)
{
	for (unsigned x = 0; x < FT_N; x++) {
		const char *nt = nt_kernel_for(c, ft_extents[x]);

		ft_count = 0;
		ft_add(x, FT_HZ, "hz_clear_hint", NULL, NULL);
		ft_add(x, FT_MEMSET, "memset", NULL, NULL);
		if (nt == NULL)
			continue;
		ft_add(x, FT_NT, "nt_kernel", nt, NULL);
		for (unsigned m = 0; !c->quick && m < n_methods && ft_count < FT_MAX; m++)
			if (methods[m].kind == KERNEL && !methods[m].nontemporal)
				ft_add(x, FT_SPLIT, NULL, nt, methods[m].kernel);
	}
}

static void ft_clear(const struct ft_result *f, char *p, size_t len, size_t hot)
{
	switch (f->kind) {
	case FT_HZ:
		hz_clear(p, len, p);
		break;
	case FT_MEMSET:
		memset(p, 0, len);
		break;
	case FT_NT:
		hz_clear_with(f->kernel, p, len);
		break;
	case FT_SPLIT:
		hz_clear_with(f->kernel, p + hot, len - hot);
		hz_clear_with(f->hot_kernel, p, hot);
		break;
	}
}

static void run_first_touch(const struct config *c, const struct bench_buf *b,
			    const struct bench_buf *ev)
{
	double tpn = bench_ticks_per_ns();
	size_t slot = 0, hot = hot_bytes();

	policy_restore();
	ft_methods(c);
	for (unsigned r = 0; r < c->ft_reps; r++)
		for (unsigned x = 0; x < FT_N; x++)
			for (unsigned m = 0; m < ft_count; m++) {
				size_t len = ft_extents[x];
				struct ft_result *f = &ft[x][m];
				uint64_t c0, c1, r0, r1, r2;
				int tries = 0, preempted;

				do {
					char *p;
					long pre;

					/* A different extent each time, walking the buffer. */
					if ((slot + 1) * len > b->len)
						slot = 0;
					p = b->p + slot++ * len;
					flush_range(p, len);
					bench_dirty(ev->p, ev->len);
					pre = bench_preemptions();
					c0 = bench_ticks_begin();
					ft_clear(f, p, len, hot < len ? hot : len);
					c1 = bench_ticks_end();
					r0 = bench_ticks_begin();
					sink += bench_read(p, FT_READ_SMALL);
					r1 = bench_ticks_end();
					sink += bench_read(p + FT_READ_SMALL,
							   FT_READ_LARGE - FT_READ_SMALL);
					r2 = bench_ticks_end();
					/* Preempted while timed: another task's time is in
					 * the figures. Take it again, a few times at most. */
					preempted = bench_preemptions() != pre;
				} while (preempted && ++tries < 5);
				ft_retaken += preempted ? tries - 1 : tries;
				ft_kept_preempted += preempted;
				f->clear_ns[r] = (double)(c1 - c0) / tpn;
				f->read_small_ns[r] = (double)(r1 - r0) / tpn;
				f->read_large_ns[r] = (double)(r2 - r0) / tpn;
			}
	for (unsigned x = 0; x < FT_N; x++)
		for (unsigned m = 0; m < ft_count; m++) {
			struct ft_result *f = &ft[x][m];
			double v[MAX_ROUNDS];

			memcpy(v, f->clear_ns, c->ft_reps * sizeof v[0]);
			f->clear = bench_stat_of(v, c->ft_reps);
			memcpy(v, f->read_small_ns, c->ft_reps * sizeof v[0]);
			f->read_small = bench_stat_of(v, c->ft_reps);
			memcpy(v, f->read_large_ns, c->ft_reps * sizeof v[0]);
			f->read_large = bench_stat_of(v, c->ft_reps);
		}
}

/* ---- output ------------------------------------------------------------ */

static const char *ft_note(const struct ft_result *r, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (r->kind == FT_NT)
		snprintf(buf, cap, "%s", r->kernel);
	else if (r->kind == FT_SPLIT)
		snprintf(buf, cap, "%s then %s on the first %zu KiB", r->kernel,
			 r->hot_kernel, hot_bytes() >> 10);
	return buf;
}

static void csv_row(FILE *f, const char *section, const char *method, size_t extent,
		    const char *metric, const char *unit, struct bench_stat s,
		    const char *note)
{
	fprintf(f, "%s,%s,%zu,%s,%s,%zu,%.6g,%.6g,%.6g,%s\n", section, method, extent,
		metric, unit, s.n, s.median, s.min, s.max, note ? note : "");
}

/* How much the run shared its CPU, for the reader to judge the figures. */
static const char *sharing_line(const struct config *c, char *buf, size_t cap)
{
	snprintf(buf, cap,
		 "sharing: wall/CPU time per bandwidth sample median %.2f, max %.2f "
		 "(1.00 = the CPU was ours alone); first-touch runs retaken after a "
		 "preemption %u, kept preempted %u of %u",
		 busy_all.median, busy_all.max, ft_retaken, ft_kept_preempted,
		 c->ft_reps * (unsigned)FT_N * ft_count);
	return buf;
}

static void write_csv(const struct config *c, const char *header)
{
	FILE *f;
	char note[64], line[512];

	if (bench_mkdir_for(c->csv) != 0 || (f = fopen(c->csv, "w")) == NULL) {
		fprintf(stderr, "bench-clear: cannot write %s: %s\n", c->csv, strerror(errno));
		return;
	}
	fputs(header, f);
	fprintf(f, "# %s\n", sharing_line(c, line, sizeof line));
	fprintf(f, "section,method,extent_bytes,metric,unit,n,median,min,max,note\n");
	/* Grouped by method, so a plot draws one unbroken line per method. */
	for (unsigned m = 0; m < n_methods; m++)
		for (unsigned e = 0; e < c->n_ext; e++) {
			note[0] = '\0';
			if (methods[m].kind == HZ_NULL || methods[m].kind == HZ_START)
				snprintf(note, sizeof note, "auto:%s",
					 hz_clear_kernel_for(c->extents[e]));
			csv_row(f, "bandwidth", methods[m].name, c->extents[e], "clear_bw",
				"GB/s", bw[m][e], note);
		}
	for (int hint = 0; hint < 2; hint++) {
		int hz = method_index(hint ? "hz_clear_hint" : "hz_clear");
		int ms = method_index("memset");
		char name[64];

		snprintf(name, sizeof name, "%s/memset", methods[hz].name);
		for (unsigned e = 0; e < c->n_ext; e++)
			csv_row(f, "ratio", name, c->extents[e], "bw_ratio", "x",
				paired(samples[hz][e], samples[ms][e], c->rounds), NULL);
		snprintf(name, sizeof name, "%s/best_kernel", methods[hz].name);
		for (unsigned e = 0; e < c->n_ext; e++) {
			int k = best_kernel(e, 0);

			snprintf(note, sizeof note, "best=%s", methods[k].name);
			csv_row(f, "ratio", name, c->extents[e], "bw_ratio", "x",
				paired(samples[hz][e], samples[k][e], c->rounds), note);
		}
	}
	for (unsigned x = 0; c->ft_reps && x < FT_N; x++)
		for (unsigned m = 0; m < ft_count; m++) {
			struct ft_result *r = &ft[x][m];

			ft_note(r, note, sizeof note);
			csv_row(f, "first_touch", r->name, ft_extents[x], "clear", "ns",
				r->clear, note);
			csv_row(f, "first_touch", r->name, ft_extents[x], "read_16k", "ns",
				r->read_small, note);
			csv_row(f, "first_touch", r->name, ft_extents[x], "read_256k", "ns",
				r->read_large, note);
		}
	fclose(f);
}

static void print_table(const struct config *c)
{
	char s[32], line[512];

	printf("\nBandwidth, GB/s (10^9 bytes/s over the thread's CPU time): median (min-max)\n"
	       "over %u rounds. %s\n\n", c->rounds, sharing_line(c, line, sizeof line));
	printf("| extent | auto pass |");
	for (unsigned m = 0; m < n_methods; m++)
		printf(" %s |", methods[m].name);
	printf("\n|---|---|");
	for (unsigned m = 0; m < n_methods; m++)
		printf("---|");
	printf("\n");
	for (unsigned e = 0; e < c->n_ext; e++) {
		int best = best_kernel(e, 0);

		printf("| %s | %s |", bench_size_str(c->extents[e], s, sizeof s),
		       hz_clear_kernel_for(c->extents[e]));
		for (unsigned m = 0; m < n_methods; m++)
			printf(" %s%.1f (%.1f-%.1f)%s |", (int)m == best ? "**" : "",
			       bw[m][e].median, bw[m][e].min, bw[m][e].max,
			       (int)m == best ? "**" : "");
		printf("\n");
	}
	printf("\n(bold: the fastest single kernel at that extent)\n");

	printf("\nRatios, median (min-max) of per-round pairs\n\n"
	       "| extent | hz_clear/memset | hz_clear_hint/memset | best kernel |"
	       " hz_clear/best | hz_clear_hint/best |\n|---|---|---|---|---|---|\n");
	for (unsigned e = 0; e < c->n_ext; e++) {
		int hz = method_index("hz_clear"), hh = method_index("hz_clear_hint");
		int ms = method_index("memset"), k = best_kernel(e, 0);
		struct bench_stat a = paired(samples[hz][e], samples[ms][e], c->rounds);
		struct bench_stat b = paired(samples[hh][e], samples[ms][e], c->rounds);
		struct bench_stat d = paired(samples[hz][e], samples[k][e], c->rounds);
		struct bench_stat g = paired(samples[hh][e], samples[k][e], c->rounds);

		printf("| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %s | %.2f (%.2f-%.2f) |"
		       " %.2f (%.2f-%.2f) |\n",
		       bench_size_str(c->extents[e], s, sizeof s), a.median, a.min, a.max,
		       b.median, b.min, b.max, methods[k].kernel, d.median, d.min, d.max,
		       g.median, g.min, g.max);
	}
}

static void print_first_touch(const struct config *c)
{
	char s[32];

	if (c->ft_reps == 0)
		return;
	printf("\nFirst touch: flush the extent, write %zu MiB elsewhere, clear (timed), then\n"
	       "read the first 16 KiB and the first 256 KiB (timed from the same start).\n"
	       "nt_then_hot:K clears as hz_clear(hint = start) does, with K on the neighbourhood.\n"
	       "ns, median (min-max) over %u repetitions\n\n"
	       "| extent | method | clear | read first 16 KiB | read first 256 KiB |\n"
	       "|---|---|---|---|---|\n", c->evict_len >> 20, c->ft_reps);
	for (unsigned x = 0; x < FT_N; x++)
		for (unsigned m = 0; m < ft_count; m++) {
			struct ft_result *r = &ft[x][m];
			char note[64];
			int noted = ft_note(r, note, sizeof note)[0] != '\0';

			/* The name and its note go straight to printf: gcc 12 at -O3
			 * took r->name (48 bytes) for the rest of ft[][] and saw
			 * snprintf into a buffer of 128 truncate (41,471 bytes). */
			printf("| %s | %s%s%s%s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) |"
			       " %.0f (%.0f-%.0f) |\n",
			       bench_size_str(ft_extents[x], s, sizeof s), r->name,
			       noted ? " (" : "", note, noted ? ")" : "",
			       r->clear.median, r->clear.min, r->clear.max,
			       r->read_small.median, r->read_small.min, r->read_small.max,
			       r->read_large.median, r->read_large.min, r->read_large.max);
		}
}

static void print_summary(const struct config *c)
{
	int hz = method_index("hz_clear"), ms = method_index("memset");
	char s[32];

	printf("\nsummary: hz_clear/memset");
	for (unsigned e = 0; e < c->n_ext; e++)
		printf(" %s=%.2f", bench_size_str(c->extents[e], s, sizeof s),
		       paired(samples[hz][e], samples[ms][e], c->rounds).median);
	printf("; hz_clear/best_kernel");
	for (unsigned e = 0; e < c->n_ext; e++) {
		int k = best_kernel(e, 0);

		printf(" %s=%.2f(%s)", bench_size_str(c->extents[e], s, sizeof s),
		       paired(samples[hz][e], samples[k][e], c->rounds).median,
		       methods[k].kernel);
	}
	printf("\n");
}

/* The targets, checked on the medians of per-round ratios. */
static void print_targets(const struct config *c)
{
	int ms = method_index("memset");
	char s[32];

	printf("\nTargets (median of per-round ratios):\n");
	for (int hint = 0; hint < 2; hint++) {
		int hz = method_index(hint ? "hz_clear_hint" : "hz_clear");
		double worst_a = 1e9, worst_b = 1e9, worst_c = 1e9;
		size_t at_a = 0, at_b = 0, at_c = 0;
		int have_a = 0, have_b = 0;

		for (unsigned e = 0; e < c->n_ext; e++) {
			size_t x = c->extents[e];
			double r = paired(samples[hz][e], samples[ms][e], c->rounds).median;
			double q = paired(samples[hz][e], samples[best_kernel(e, 0)][e],
					  c->rounds).median;

			if (x >= (64u << 10) && x <= (28u << 20)) {
				have_a = 1;
				if (r < worst_a)
					worst_a = r, at_a = x;
			} else {
				have_b = 1;
				if (r < worst_b)
					worst_b = r, at_b = x;
			}
			if (q < worst_c)
				worst_c = q, at_c = x;
		}
		if (have_a)
			printf("  (a) %s >= 2.4x memset, 64K-28M: %s (lowest %.2f at %s)\n",
			       methods[hz].name, worst_a >= 2.4 ? "met" : "NOT met", worst_a,
			       bench_size_str(at_a, s, sizeof s));
		if (have_b)
			printf("  (b) %s >= 0.95x memset elsewhere: %s (lowest %.2f at %s)\n",
			       methods[hz].name, worst_b >= 0.95 ? "met" : "NOT met", worst_b,
			       bench_size_str(at_b, s, sizeof s));
		printf("  (c) %s within 10%% of the best kernel: %s (lowest %.2f at %s)\n",
		       methods[hz].name, worst_c >= 0.90 ? "met" : "NOT met", worst_c,
		       bench_size_str(at_c, s, sizeof s));
	}
	if (c->ft_reps) {
		struct ft_result *h = &ft[0][0], *m = &ft[0][1];
		struct bench_stat rd = paired(h->read_small_ns, m->read_small_ns, c->ft_reps);
		struct bench_stat cl = paired(h->clear_ns, m->clear_ns, c->ft_reps);

		printf("  (d) 2M, hint = start: first 16 KiB read %.2fx memset's (<= 1.2: %s),"
		       " clear %.2fx memset's (<= 0.45: %s)\n",
		       rd.median, rd.median <= 1.2 ? "met" : "NOT met", cl.median,
		       cl.median <= 0.45 ? "met" : "NOT met");
	}
}

int main(int argc, char **argv)
{
	struct config c;
	struct bench_buf buf = { 0 }, ev = { 0 };
	struct utsname u;
	char model[256], header[2048], date[32];
	time_t now = time(NULL);
	double share, ev_share = -1;
	uint64_t t0 = bench_now_ns();
	int cpu;

	parse_args(&c, argc, argv);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
	env_kernel = getenv("HUGEZERO_CLEAR");
	cpu = bench_pin(c.cpu);
	uname(&u);
	list_methods(stdout);

	bench_buf_map(&buf, c.buf_len);
	share = bench_buf_thp_share(&buf, 1);
	bench_buf_map(&ev, c.evict_len);
	ev_share = bench_buf_thp_share(&ev, 1);
	snprintf(header, sizeof header,
		 "# bench-clear hugezero %s, %s, %s%s%s\n"
		 "# cpu: %s; cpu pinned: %d; kernel: %s %s; glibc %s\n"
		 "# buffer %zu MiB, THP share %.1f%%; evict buffer %zu MiB, THP share %.1f%%\n"
		 "# rounds %u, first-touch repetitions %u; kernels %s; "
		 "HUGEZERO_CLEAR=%s HUGEZERO_CLEAR_NT_MIN=%s HUGEZERO_CLEAR_RADIUS=%s\n",
		 hz_version(), date, c.quick ? "quick" : "full",
		 c.hot ? ", HOT: one extent cleared repeatedly" : "",
		 c.forced ? ", kernels forced into hz_clear" : "",
		 bench_cpu_model(model, sizeof model), cpu, u.sysname, u.release,
		 gnu_get_libc_version(), buf.len >> 20, share * 100, ev.len >> 20,
		 ev_share * 100, c.rounds, c.ft_reps,
		 c.forced ? "forced into hz_clear (hz_clear_set_kernel)" : "via hz_clear_with",
		 env_kernel ? env_kernel : "", getenv("HUGEZERO_CLEAR_NT_MIN") ? getenv("HUGEZERO_CLEAR_NT_MIN") : "",
		 getenv("HUGEZERO_CLEAR_RADIUS") ? getenv("HUGEZERO_CLEAR_RADIUS") : "");
	fputs(header, stdout);
	if (share < 0.99)
		printf("WARNING: only %.1f%% of the buffer is on huge pages\n", share * 100);
	fflush(stdout);

	run_bandwidth(&c, &buf, &ev);
	if (c.ft_reps)
		run_first_touch(&c, &buf, &ev);

	print_table(&c);
	print_first_touch(&c);
	print_summary(&c);
	print_targets(&c);
	write_csv(&c, header);
	printf("\nCSV: %s; %.1f s in all\n", c.csv, (double)(bench_now_ns() - t0) / 1e9);
	bench_buf_unmap(&ev);
	bench_buf_unmap(&buf);
	return 0;
}
