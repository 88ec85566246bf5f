/* hugezero plot FILE [-o PNG] [-t TITLE]: draws what `hugezero run --record FILE`
 * wrote, in three panels over time (memory, zeroing, reuse), with gnuplot.
 * The script is written here and fed to gnuplot's standard input, so the
 * command works the same from the build tree and installed, with no data
 * file to find. */
#include "record.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 2

static const char usage_plot[] =
	"usage: hugezero plot FILE [-o PNG] [-t TITLE]\n"
	"\n"
	"Draws a recording of `hugezero run --record FILE` as a PNG (900x600) in\n"
	"three panels over time: memory (large blocks live, the cache, bytes mapped\n"
	"on huge and on 4 KiB pages), zeroing (by the pre-zero thread, by calloc)\n"
	"and reuse (blocks reused, fresh, promoted to THP). Runs gnuplot, which\n"
	"must be on PATH (Debian, Ubuntu: the gnuplot-nox package).\n"
	"\n"
	"  -o PNG      the picture (default: FILE with .png for its extension)\n"
	"  -t TITLE    the picture's title (default: FILE's name)\n"
	"  --help      this text\n"
	"\n"
	"exit status: 0 success, 2 usage error, 1 FILE unreadable or not a\n"
	"recording, gnuplot missing or failed.\n";

/* Colours of bench/plot-*.gp: hugezero's orange, then the others. */
static const char script[] =
	"set terminal pngcairo size 900,600 noenhanced font ',9'\n"
	"set datafile separator '\\t'\n"
	"MiB = 1048576.0\n"
	"GiB = 1073741824.0\n"
	"t = 'elapsed_s'\n"
	"c(name) = column(name)\n"
	"set multiplot layout 3,1 title title font ',10'\n"
	"set lmargin at screen 0.08\n"
	"set rmargin at screen 0.76\n"
	"set autoscale xfix\n"
	"set key outside right top\n"
	"set grid\n"
	"set format x ''\n"
	"set ylabel 'MiB'\n"
	"set title 'memory: large blocks live and cached now; bytes of new blocks so far (dashed)'\n"
	"plot in using t:(c('live_bytes')/MiB) with lines lw 2 lc rgb '0xd95f02' title 'live', \\\n"
	"  in using t:(c('cache_bytes')/MiB) with lines lw 2 lc rgb '0x1b9e77' title 'cache', \\\n"
	"  in using t:((c('new_hugetlb_bytes') + c('new_thp_bytes'))/MiB) with lines dt 2 lw 2 \\\n"
	"    lc rgb '0x7570b3' title 'on huge pages', \\\n"
	"  in using t:(c('new_4k_bytes')/MiB) with lines dt 2 lw 2 lc rgb '0x999999' \\\n"
	"    title 'on 4 KiB pages'\n"
	"set title 'zeroing so far: off the critical path (pre-zero thread) and on it (calloc)'\n"
	"set ylabel 'GiB'\n"
	"plot in using t:(c('zeroed_by_thread_bytes')/GiB) with lines lw 2 lc rgb '0x1b9e77' \\\n"
	"    title 'pre-zero thread', \\\n"
	"  in using t:(c('zeroed_by_calloc_bytes')/GiB) with lines lw 2 lc rgb '0xd95f02' \\\n"
	"    title 'calloc'\n"
	"set title 'large requests so far: served by reuse or by a fresh block; blocks promoted to THP'\n"
	"set format x '%g'\n"
	"set xlabel 'seconds'\n"
	"set ylabel 'blocks'\n"
	"plot in using t:(c('cache_hits')) with lines lw 2 lc rgb '0x1b9e77' title 'reused', \\\n"
	"  in using t:(c('cache_misses')) with lines lw 2 lc rgb '0xd95f02' title 'fresh', \\\n"
	"  in using t:(c('thp_promoted')) with lines dt 2 lw 2 lc rgb '0x7570b3' \\\n"
	"    title 'promoted to THP'\n"
	"unset multiplot\n";

/* A gnuplot single-quoted string: '' stands for a quote inside. */
static void put_quoted(FILE *to, const char *s)
{
	fputc('\'', to);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', to);
		fputc(*s, to);
	}
	fputc('\'', to);
}

/* A row of HZ_RECORD_COLUMNS tab-separated numbers. */
static bool row_ok(char *line)
{
	char *p = line, *end;
	int n = 0;

	line[strcspn(line, "\n")] = '\0';
	for (;;) {
		(void)strtod(p, &end);
		if (end == p || (*end != '\t' && *end != '\0'))
			return false;
		n++;
		if (*end == '\0')
			return n == HZ_RECORD_COLUMNS;
		p = end + 1;
	}
}

/* 0 when file is a recording with at least one sample; else says what it
 * is instead and returns 1. */
static int check_recording(const char *file)
{
	FILE *in = fopen(file, "re");
	char line[1024];
	unsigned rows = 0, at = 1;
	bool ok;

	if (in == NULL) {
		fprintf(stderr, "hugezero plot: %s: %s\n", file, strerror(errno));
		return 1;
	}
	ok = fgets(line, sizeof(line), in) && strcmp(line, HZ_RECORD_HEADER "\n") == 0;
	while (ok && fgets(line, sizeof(line), in)) {
		at++;
		ok = row_ok(line);
		rows++;
	}
	fclose(in);
	if (!ok) {
		fprintf(stderr, "hugezero plot: %s, line %u: not what `hugezero run --record` "
			"writes (%s)\n", file, at,
			at == 1 ? "its header line differs" : "a row of 12 tab-separated numbers");
		return 1;
	}
	if (rows == 0) {
		fprintf(stderr, "hugezero plot: %s has no samples, only its header: the "
			"recorded program was never read (hugezero run said why)\n", file);
		return 1;
	}
	return 0;
}

/* Whether an executable gnuplot is in a directory of PATH. */
static bool gnuplot_on_path(void)
{
	const char *path = getenv("PATH");
	char dir[4096];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		if (snprintf(dir, sizeof(dir), "%.*s/gnuplot", (int)n, n ? path : ".") <
			    (int)sizeof(dir) &&
		    access(dir, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Feeds the variables and the script to gnuplot's standard input: no
 * shell, so file names need only gnuplot's own quoting. */
static int run_gnuplot(const char *in, const char *out, const char *title)
{
	int fds[2], status = 0;
	FILE *to;
	pid_t p;

	if (pipe(fds) != 0 || (p = fork()) < 0) {
		fprintf(stderr, "hugezero plot: cannot start gnuplot: %s\n", strerror(errno));
		return 1;
	}
	if (p == 0) {
		char *argv[] = { "gnuplot", NULL };

		dup2(fds[0], 0);
		close(fds[0]);
		close(fds[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "hugezero plot: cannot run gnuplot: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	to = fdopen(fds[1], "w");
	if (to == NULL) {
		close(fds[1]);
	} else {
		fputs("in = ", to);
		put_quoted(to, in);
		fputs("\ntitle = ", to);
		put_quoted(to, title);
		fputs("\nset output ", to);
		put_quoted(to, out);
		fprintf(to, "\n%s", script);
		fclose(to); /* EPIPE if gnuplot died: its status tells */
	}
	while (waitpid(p, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "hugezero plot: gnuplot failed (%s %d) drawing %s\n",
			WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
		return 1;
	}
	return 0;
}

/* FILE with .png for its extension (or added, when it has none). */
static char *default_output(const char *file)
{
	const char *slash = strrchr(file, '/'), *dot = strrchr(file, '.');
	size_t stem = dot && dot > (slash ? slash + 1 : file) ? (size_t)(dot - file)
							     : strlen(file);
	char *out = malloc(stem + 5);

	if (out)
		snprintf(out, stem + 5, "%.*s.png", (int)stem, file);
	return out;
}

static int plot(const char *file, const char *out, const char *title)
{
	const char *slash = strrchr(file, '/');
	struct stat st;

	if (check_recording(file) != 0)
		return 1;
	if (!gnuplot_on_path()) {
		fprintf(stderr, "hugezero plot: gnuplot is not on PATH; install it (Debian, "
			"Ubuntu: apt-get install gnuplot-nox)\n");
		return 1;
	}
	if (run_gnuplot(file, out, title ? title : slash ? slash + 1 : file) != 0)
		return 1;
	if (stat(out, &st) != 0 || st.st_size == 0) {
		fprintf(stderr, "hugezero plot: gnuplot wrote nothing to %s\n", out);
		return 1;
	}
	return 0;
}

int hz_cmd_plot(int argc, char **argv)
{
	const char *file = NULL, *out = NULL, *title = NULL;
	char *made = NULL;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_plot, stdout);
			return 0;
		} else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && !out) {
			out = argv[++i];
		} else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc && !title) {
			title = argv[++i];
		} else if (argv[i][0] != '-' && !file) {
			file = argv[i];
		} else {
			fprintf(stderr, "hugezero plot: unexpected argument '%s'\n%s", argv[i],
				usage_plot);
			return EXIT_USAGE;
		}
	}
	if (!file) {
		fprintf(stderr, "hugezero plot: no FILE given\n%s", usage_plot);
		return EXIT_USAGE;
	}
	if (!out)
		out = made = default_output(file);
	ret = out ? plot(file, out, title) : 1;
	free(made);
	return ret;
}
