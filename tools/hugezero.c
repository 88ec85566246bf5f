/* hugezero: run programs under hugezero and explain the system's readiness.
 *
 *   hugezero run [--record FILE] [OPTIONS] [--] CMD [ARGS...]
 *   hugezero plot FILE [-o PNG] [-t TITLE]
 *   hugezero status
 *   hugezero stats [--json] [--watch [SECONDS]] [PID]
 *   hugezero stats --openmetrics | --textfile DIR [PID]
 *   hugezero --version | --help
 *
 * Exit status: the command's own for `run`; 0 success; 2 usage error;
 * 126 the command cannot be executed; 127 it was not found; 1 other errors. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <hugezero.h>

#include "config.h"
#include "options.h"
#include "prim/features.h"
#include "prim/os.h"
#include "prim/prim.h"
#include "quickbench.h"
#include "record.h"
#include "stats_cmd.h"

#define EXIT_USAGE 2

static const char usage_main[] =
	"usage: hugezero COMMAND [ARGS...]\n"
	"\n"
	"commands:\n"
	"  run [OPTIONS] [--] CMD [ARGS...]  run CMD with libhugezero-preload.so;\n"
	"                                    --record FILE: its counters over time\n"
	"  plot FILE [-o PNG] [-t TITLE]     draw a --record FILE (needs gnuplot)\n"
	"  status                            kernel, huge pages, CPU and options, with advice\n"
	"  stats [--json] [--watch [SECONDS]] [PID]\n"
	"                                    a running process's exit report, now; no PID: list\n"
	"  stats --openmetrics | --textfile DIR [PID]\n"
	"                                    the counters for Prometheus; no PID: every process\n"
	"  bench [quick|full]                hugezero against glibc on this machine\n"
	"  folios [PID|self] [--all] [--json]  executable text by folio size\n"
	"  prewarm FILE...                   read files' text into large folios\n"
	"\n"
	"  hugezero --version    print the version\n"
	"  hugezero COMMAND --help\n"
	"\n"
	"exit status: run passes the command's through; 0 success, 2 usage error,\n"
	"126 command not executable, 127 command not found, 1 other errors.\n";

/* The options of `run`. Each sets one HUGEZERO_* variable through its
 * entry in the options table, which checks the value and names the
 * choices, so the command and the variable accept and refuse the same. */
struct run_flag {
	const char *flag;
	enum hz_option_id id;
	const char *fixed; /* the value it sets; NULL: the next argument */
	const char *help;  /* NULL: none beyond the variable */
};

static const struct run_flag run_flags[] = {
	{ "--backing", HZ_OPT_BACKING, NULL, NULL },
	{ "--threshold", HZ_OPT_THRESHOLD, NULL, "e.g. 512K" },
	{ "--populate", HZ_OPT_POPULATE, "1", "fault new blocks in at once" },
	{ "--no-populate", HZ_OPT_POPULATE, "0", NULL },
	{ "--prezero", HZ_OPT_PREZERO, NULL, NULL },
	{ "--exec", HZ_OPT_EXEC, NULL, NULL },
	{ "--stats", HZ_OPT_STATS, "1", "a summary on stderr at exit" },
};

#define RUN_FLAG_COUNT (sizeof(run_flags) / sizeof(run_flags[0]))

static void usage_line(FILE *out, const char *left, const char *right)
{
	if (strlen(left) < 24)
		fprintf(out, "  %-24s%s\n", left, right);
	else
		fprintf(out, "  %s\n  %-24s%s\n", left, "", right);
}

static void usage_flag(FILE *out, const struct run_flag *f)
{
	const struct hz_option_desc *d = hz_option_desc(f->id);
	char left[128], right[256];
	int n;

	if (f->fixed) {
		snprintf(left, sizeof(left), "%s", f->flag);
		n = snprintf(right, sizeof(right), "%s=%s", d->env, f->fixed);
	} else {
		/* An ENUM lists its words; the others name their kind. */
		snprintf(left, sizeof(left), "%s %s", f->flag,
			 d->type == HZ_OPT_ENUM ? d->choices : "SIZE");
		n = snprintf(right, sizeof(right), "%s", d->env);
	}
	if (f->help)
		n += snprintf(right + n, sizeof(right) - (size_t)n, "%s %s",
			      f->fixed ? ":" : ",", f->help);
	if ((f->fixed && strcmp(f->fixed, d->def) == 0) ||
	    (!f->fixed && d->type != HZ_OPT_ENUM))
		snprintf(right + n, sizeof(right) - (size_t)n, " (default%s%s)",
			 f->fixed ? "" : " ", f->fixed ? "" : d->def);
	usage_line(out, left, right);
}

static void usage_run(FILE *out)
{
	char verbose[64];

	fputs("usage: hugezero run [OPTIONS] [--] CMD [ARGS...]\n"
	      "\n"
	      "Runs CMD with libhugezero-preload.so appended to LD_PRELOAD; each option\n"
	      "sets the HUGEZERO_* variable named after it (see hugezero(7)).\n"
	      "\n", out);
	for (size_t i = 0; i < RUN_FLAG_COUNT; i++)
		usage_flag(out, &run_flags[i]);
	snprintf(verbose, sizeof(verbose), "%s=1; twice for 2",
		 hz_option_desc(HZ_OPT_VERBOSE)->env);
	usage_line(out, "--verbose, -v", verbose);
	usage_line(out, "--record FILE", "run CMD in a child, writing its counters to");
	usage_line(out, "", "FILE every 0.1 s (tab-separated, a header line);");
	usage_line(out, "", "only CMD's own process, not those it starts.");
	usage_line(out, "", "hugezero plot FILE draws them");
	usage_line(out, "--help", "this text");
}

/* Check value against the option's table entry and export it. A refused
 * value reads as the environment's warning would say it. */
static int set_option(const char *flag, enum hz_option_id id, const char *value)
{
	const struct hz_option_desc *d = hz_option_desc(id);
	char text[HZ_OPTION_TEXT_MAX], why[512];
	uint64_t v;
	int ret;

	if (value == NULL) {
		fprintf(stderr, "hugezero run: %s needs a value (%s)\n", flag, d->choices);
		return -1;
	}
	ret = hz_option_parse(d, value, &v, text);
	if (ret != 0) {
		hz_option_explain(d, value, ret, why, sizeof(why));
		fprintf(stderr, "hugezero run: %s: %s\n", flag, why);
		return -1;
	}
	setenv(d->env, value, 1);
	return 0;
}

static const struct run_flag *find_flag(const char *arg)
{
	for (size_t i = 0; i < RUN_FLAG_COUNT; i++)
		if (strcmp(arg, run_flags[i].flag) == 0)
			return &run_flags[i];
	return NULL;
}

/* The preload sits next to the libhugezero.so this program runs with,
 * in the build tree or where it was installed. */
static int preload_path(char *out, size_t size)
{
	Dl_info info;
	const char *slash;

	if (!dladdr((void *)hz_version, &info) || !info.dli_fname)
		return -1;
	slash = strrchr(info.dli_fname, '/');
	if (!slash)
		return -1;
	if (snprintf(out, size, "%.*s/libhugezero-preload.so",
		     (int)(slash - info.dli_fname), info.dli_fname) >= (int)size)
		return -1;
	return access(out, R_OK) == 0 ? 0 : -1;
}

static int find_preload(const char *who, char *path, size_t size)
{
	if (preload_path(path, size) == 0)
		return 0;
	fprintf(stderr, "hugezero %s: cannot find libhugezero-preload.so next to "
			"libhugezero.so (is the installation complete?)\n", who);
	return -1;
}

static int append_preload(void)
{
	const char *old = getenv("LD_PRELOAD");
	char path[4096], *value;
	int ret;

	if (find_preload("run", path, sizeof(path)) != 0)
		return -1;
	if (old && *old) {
		value = malloc(strlen(old) + strlen(path) + 2);
		if (!value)
			return -1;
		sprintf(value, "%s:%s", old, path);
	} else {
		value = strdup(path);
	}
	if (!value)
		return -1;
	/* setenv copies it, also when it fails */
	ret = setenv("LD_PRELOAD", value, 1);
	free(value);
	return ret == 0 ? 0 : -1;
}

static int cmd_run(int argc, char **argv)
{
	const char *record = NULL;
	int verbose = 0, i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
		const struct run_flag *f = find_flag(a);

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage_run(stdout);
			return 0;
		} else if (f) {
			if (set_option(a, f->id, f->fixed ? f->fixed : next) != 0)
				return EXIT_USAGE;
			i += f->fixed ? 0 : 1;
		} else if (strcmp(a, "--record") == 0) {
			if (next == NULL || next[0] == '\0' || next[0] == '-') {
				fprintf(stderr, "hugezero run: --record needs a FILE\n");
				return EXIT_USAGE;
			}
			record = next;
			i++;
		} else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
			verbose = verbose < 2 ? verbose + 1 : 2;
		} else if (strcmp(a, "-vv") == 0) {
			verbose = 2;
		} else {
			fprintf(stderr, "hugezero run: unknown option '%s'\n", a);
			usage_run(stderr);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "hugezero run: no command given\n");
		usage_run(stderr);
		return EXIT_USAGE;
	}
	if (verbose && set_option("--verbose", HZ_OPT_VERBOSE, verbose == 1 ? "1" : "2") != 0)
		return EXIT_USAGE;
	if (append_preload() != 0)
		return 1;
	if (record)
		return hz_record_run(record, argv + i);
	execvp(argv[i], argv + i);
	fprintf(stderr, "hugezero run: %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- status ---- */

static void read_line(const char *path, char *buf, size_t size)
{
	if (hz_prim_read_file(path, buf, size) < 0)
		snprintf(buf, size, "(unreadable)");
	buf[strcspn(buf, "\n")] = '\0';
}

static void show_kernel(void)
{
	struct utsname u;

	uname(&u);
	printf("kernel\n  %s %s %s\n", u.sysname, u.release, u.machine);
	printf("  MADV_POPULATE_WRITE   %s\n", hz_feature_populate_write() ? "yes" : "missing (needs 5.14)");
	printf("  MADV_COLLAPSE         %s\n", hz_feature_collapse() ? "yes" : "missing (needs 6.1)");
	printf("  cachestat             %s\n", hz_feature_cachestat() ? "yes" : "missing (needs 6.5)");
	printf("  PR_SET_VMA_ANON_NAME  %s\n", hz_feature_anon_name() ? "yes" :
	       "missing (needs 5.17 and CONFIG_ANON_VMA_NAME): mappings stay unnamed");
}

struct advice {
	char lines[8][256];
	int count;
};

static void advise(struct advice *a, const char *text)
{
	if (a->count < 8)
		snprintf(a->lines[a->count++], sizeof(a->lines[0]), "%s", text);
}

static void show_thp(struct advice *a)
{
	static const char dir[] = "/sys/kernel/mm/transparent_hugepage";
	static const char *const sizes[] = { "16kB", "32kB", "64kB", "128kB", "256kB",
					     "512kB", "1024kB", "2048kB" };
	char path[256], buf[256];

	printf("transparent huge pages\n");
	snprintf(path, sizeof(path), "%s/enabled", dir);
	read_line(path, buf, sizeof(buf));
	printf("  enabled   %s\n", buf);
	if (strstr(buf, "[never]"))
		advise(a, "THP is off: hugezero falls back to 4 KiB pages. Enable it for "
			  "madvise users:\n    echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
	snprintf(path, sizeof(path), "%s/defrag", dir);
	read_line(path, buf, sizeof(buf));
	printf("  defrag    %s\n", buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "%s/hugepages-%s/enabled", dir, sizes[i]);
		if (hz_prim_read_file(path, buf, sizeof(buf)) < 0)
			continue;
		buf[strcspn(buf, "\n")] = '\0';
		printf("  mTHP %-7s %s\n", sizes[i], buf);
		if (strcmp(sizes[i], "64kB") == 0 && strstr(buf, "[never]"))
			advise(a, "64 KiB mTHP is off, so `--exec remap` can only use 2 MiB pages. "
				  "To allow 64 KiB folios for madvised memory:\n"
				  "    echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled");
	}
}

static void show_hugetlb(struct advice *a)
{
	static const char *const pools[] = { "hugepages-2048kB", "hugepages-1048576kB" };
	uint64_t total2m = 0;

	printf("hugetlb pools\n");
	for (size_t i = 0; i < 2; i++) {
		char path[128];
		uint64_t total = 0, free_pages = 0;

		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/nr_hugepages", pools[i]);
		if (hz_prim_read_u64(path, &total) != 0) {
			printf("  %-20s not supported\n", pools[i] + 10);
			continue;
		}
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/free_hugepages", pools[i]);
		hz_prim_read_u64(path, &free_pages);
		printf("  %-8s %llu pages, %llu free\n", pools[i] + 10,
		       (unsigned long long)total, (unsigned long long)free_pages);
		if (i == 0)
			total2m = total;
	}
	if (total2m == 0)
		advise(a, "The 2 MiB hugetlb pool is empty, so large blocks use THP. Pool pages "
			  "fault fastest (on VMs too); to reserve 4 GiB of them:\n"
			  "    sysctl -w vm.nr_hugepages=2048");
}

static void print_size(const char *label, uint64_t bytes)
{
	printf("%s %.1f MiB", label, (double)bytes / (1 << 20));
}

/* The memory cgroup's limit, as the cache reads it (cache_policy.c): a
 * limit that cannot be read is taken as the tightest, which a container
 * that hides /proc or the cgroup filesystem should know. */
static void show_memcg(struct advice *a)
{
	struct hz_os_cgroup cg;
	struct hz_os_memcg m;
	int ret = hz_os_cgroup_find("memory", &cg);

	printf("memory cgroup\n");
	if (ret == 0)
		ret = hz_os_memcg_read(&cg, &m);
	if (ret != 0) {
		printf("  cannot be read (%s): freed blocks are kept only for a request of "
		       "their size, as under the tightest limit\n", strerror(-ret));
		advise(a, "The memory cgroup cannot be read (/proc or the cgroup filesystem is "
			  "hidden or not mounted), so hugezero keeps few freed blocks. Show the "
			  "container its /proc and /sys/fs/cgroup to let it read the limit.");
		return;
	}
	printf("  %s (%s)", cg.dir, cg.v2 ? "v2" : "v1");
	if (m.limit == HZ_OS_UNLIMITED) {
		printf(": no limit\n");
		return;
	}
	print_size(": limit", m.limit);
	print_size(",", m.room);
	printf(" free; freed blocks are kept only within that room, less a headroom\n");
}

static void show_clearing(void)
{
	printf("clearing kernels\n");
	for (unsigned i = 0; i < hz_clear_kernel_count(); i++) {
		const char *why = NULL;
		int ok = hz_clear_kernel_supported(i, &why);

		printf("  %-10s %-9s %s%s\n", hz_clear_kernel_name(i),
		       hz_clear_kernel_nontemporal(i) ? "streaming" : "cached",
		       ok ? "available" : "unavailable: ", ok ? "" : why);
	}
	printf("  auto: %s below HUGEZERO_CLEAR_NT_MIN (%llu bytes), %s from there on\n",
	       hz_clear_kernel_for(1), (unsigned long long)hz_config()->clear_nt_min,
	       hz_clear_kernel_for((size_t)1 << 30));
	/* zero.c: a calloc's own clear of a block that fits in half the
	 * last-level cache uses cached stores, so the program's writes hit. */
	unsigned long long llc = hz_prim_llc_size();

	if (llc == 0)
		printf("  last-level cache: size unknown (/sys/devices/system/cpu/cpu0/cache "
		       "tells none), so calloc clears with the kernels above\n");
	else
		printf("  last-level cache: %llu KiB, so calloc clears blocks up to %llu KiB "
		       "with cached stores\n", llc >> 10, llc >> 11);
}

static void format_value(enum hz_option_id id, char *out, size_t size)
{
	const struct hz_option_desc *d = hz_option_desc(id);
	uint64_t v = hz_option_u64(id);

	switch (d->type) {
	case HZ_OPT_SIZE: {
		static const char units[] = "KMGT";
		int u = -1;

		while (u < 3 && v >= 1024 && v % 1024 == 0) {
			v /= 1024;
			u++;
		}
		snprintf(out, size, u < 0 ? "%llu" : "%llu%c", (unsigned long long)v,
			 u < 0 ? 0 : units[u]);
		break;
	}
	case HZ_OPT_ENUM:
		snprintf(out, size, "%s", v < d->word_count ? d->words[v] : "?");
		break;
	case HZ_OPT_NAME:
	case HZ_OPT_PATH:
		snprintf(out, size, "%s", hz_option_str(id)[0] ? hz_option_str(id) : "(none)");
		break;
	default:
		snprintf(out, size, "%llu", (unsigned long long)v);
		break;
	}
}

static void show_options(struct advice *a)
{
	static const char *const sources[] = { "default", "environment",
					       "default: the environment's value is invalid" };
	int width = 0;

	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		int len = (int)strlen(hz_option_desc((enum hz_option_id)id)->env);

		width = len > width ? len : width;
	}
	printf("options (HUGEZERO_*, in this environment)\n");
	for (unsigned id = 0; id < HZ_OPT_COUNT; id++) {
		char value[HZ_OPTION_TEXT_MAX];
		enum hz_option_source src = hz_option_source((enum hz_option_id)id);

		format_value((enum hz_option_id)id, value, sizeof(value));
		printf("  %-*s %-10s (%s)\n", width, hz_option_desc((enum hz_option_id)id)->env,
		       value, sources[src]);
		if (src == HZ_SRC_INVALID_ENV)
			advise(a, "An HUGEZERO_* variable above has an invalid value; "
				  "`hugezero run --help` lists valid ones.");
	}
}

static int cmd_status(int argc, char **argv)
{
	struct advice a = { .count = 0 };

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		puts("usage: hugezero status\n\nPrints the kernel's features, THP and mTHP "
		     "settings, hugetlb pools,\nthe memory cgroup's limit, the CPU's clearing "
		     "kernels and every HUGEZERO_*\noption, then advice with the exact command "
		     "for each change worth making.");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "hugezero status: unexpected argument '%s'\n", argv[1]);
		return EXIT_USAGE;
	}
	printf("hugezero %s\n\n", hz_version());
	show_kernel();
	show_thp(&a);
	show_hugetlb(&a);
	show_memcg(&a);
	show_clearing();
	show_options(&a);
	printf("\nadvice\n");
	if (a.count == 0)
		printf("  none: this system is ready.\n");
	for (int i = 0; i < a.count; i++)
		printf("  - %s\n", a.lines[i]);
	return 0;
}

static int cmd_bench(int argc, char **argv)
{
	char preload[4096], self[4096];
	ssize_t n;
	int rounds;

	if (argc > 2 && strcmp(argv[1], "--worker") == 0)
		return hz_quickbench_worker(atoi(argv[2]));
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		puts("usage: hugezero bench [quick|full]\n\nTimes calloc + write + free "
		     "cycles of 64 and 256 MiB with glibc and with\nhugezero, alternating, "
		     "and prints medians and the speedup. quick: 5 rounds\n(under a minute), "
		     "full: 15.");
		return 0;
	}
	rounds = hz_quickbench_rounds(argc > 1 ? argv[1] : NULL);
	if (rounds < 0 || argc > 2) {
		fprintf(stderr, "hugezero bench: expected quick or full, got '%s'\n", argv[1]);
		return EXIT_USAGE;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || find_preload("bench", preload, sizeof(preload)) != 0)
		return 1;
	self[n] = '\0';
	return hz_quickbench(self, preload, rounds);
}

/* folios and prewarm are programs of their own (hugezero-folios,
 * hugezero-prewarm) installed next to this one. */
static int run_tool(const char *tool, char **argv)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	char *slash;

	if (n <= 0)
		return 1;
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (!slash || snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "%s",
			       tool) >= (int)(sizeof(path) - (size_t)(slash + 1 - path)))
		return 1;
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr, "hugezero: cannot run %s: %s\n", path, strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_main, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("hugezero %s\n", hz_version());
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "status") == 0)
		return cmd_status(argc - 1, argv + 1);
	if (strcmp(argv[1], "stats") == 0)
		return hz_cmd_stats(argc - 1, argv + 1);
	if (strcmp(argv[1], "plot") == 0)
		return hz_cmd_plot(argc - 1, argv + 1);
	if (strcmp(argv[1], "bench") == 0)
		return cmd_bench(argc - 1, argv + 1);
	if (strcmp(argv[1], "folios") == 0)
		return run_tool("hugezero-folios", argv + 1);
	if (strcmp(argv[1], "prewarm") == 0)
		return run_tool("hugezero-prewarm", argv + 1);
	fprintf(stderr, "hugezero: unknown command '%s'\n%s", argv[1], usage_main);
	return EXIT_USAGE;
}
