/* malloc_stats and malloc_info (issue 25): the text profilers parse for a
 * program's memory. glibc serves a 64 MiB malloc with mmap, and counts it
 * in malloc_info's <total type="mmap"> and in malloc_stats' "Total (incl.
 * mmap):" lines and high-water marks; the text keeps glibc's format. */
#include "hostile.h"

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#define TEXT_BLOCK (64 * MiB)
#define TEXT_MAX (1 << 20)

/* ---- malloc_info ---- */

struct mmap_total {
	long count;
	unsigned long long size;
};

/* malloc_info(0)'s text, checked for glibc's frame, and its mmap total. */
static struct mmap_total info_mmap_total(void)
{
	static const char tag[] = "\n<total type=\"mmap\" count=\"";
	static const char tail[] = "</malloc>\n";
	char *text = NULL, *at, *end;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	struct mmap_total t;

	CHECK(mem != NULL, "open_memstream: %s", strerror(errno));
	CHECK(malloc_info(0, mem) == 0, "malloc_info(0) failed");
	CHECK(fclose(mem) == 0, "fclose: %s", strerror(errno));
	CHECK(strncmp(text, "<malloc version=\"1\">\n<heap nr=\"0\">\n", 34) == 0,
	      "malloc_info does not start as glibc's: %.40s", text);
	CHECK(len > sizeof(tail) && strcmp(text + len - sizeof(tail) + 1, tail) == 0,
	      "malloc_info does not end with %s", tail);
	at = strstr(text, tag);
	CHECK(at != NULL, "no <total type=\"mmap\"> in malloc_info");
	t.count = strtol(at + sizeof(tag) - 1, &end, 10);
	CHECK(strncmp(end, "\" size=\"", 8) == 0, "mmap total: %.60s", at + 1);
	t.size = strtoull(end + 8, &end, 10);
	CHECK(strncmp(end, "\"/>\n<system type=\"current\" size=\"", 33) == 0,
	      "mmap total not followed by the current system size: %.60s", end);
	free(text);
	return t;
}

static int info_counts(void)
{
	struct mmap_total before = info_mmap_total(), live, after;
	char *p = hostile_keep(malloc(TEXT_BLOCK));
	FILE *mem;
	char *text = NULL;
	size_t len = 0;

	CHECK(p != NULL, "malloc: %s", strerror(errno));
	memset(p, 1, TEXT_BLOCK);
	live = info_mmap_total();
	free(p);
	after = info_mmap_total();
	CHECK(live.count - before.count >= 1, "mmap count %ld -> %ld with a %zu MiB block live",
	      before.count, live.count, TEXT_BLOCK >> 20);
	CHECK(live.size - before.size >= TEXT_BLOCK,
	      "mmap size %llu -> %llu MiB with a %zu MiB block live", before.size >> 20,
	      live.size >> 20, TEXT_BLOCK >> 20);
	CHECK(after.count == before.count && after.size == before.size,
	      "after free mmap count %ld size %llu; before %ld, %llu", after.count, after.size,
	      before.count, before.size);
	/* Options other than 0: EINVAL, nothing written. */
	mem = open_memstream(&text, &len);
	CHECK(mem != NULL, "open_memstream: %s", strerror(errno));
	CHECK(malloc_info(1, mem) == EINVAL, "malloc_info(1) is not EINVAL");
	CHECK(fclose(mem) == 0 && len == 0, "malloc_info(1) wrote %zu bytes", len);
	free(text);
	return 0;
}

/* ---- malloc_stats ---- */

struct stats_total {
	unsigned long system, in_use, max_regions, max_bytes;
};

/* Every line of text is one of glibc's, numbers right-aligned in 10
 * columns; the figures of "Total (incl. mmap):". Returns how many totals
 * text holds (the last one's figures in *t). */
static int parse_stats(const char *text, struct stats_total *t)
{
	static const char *const labels[] = { "system bytes     = ", "in use bytes     = ",
					      "max mmap regions = ", "max mmap bytes   = " };
	int totals = 0, row = -1;

	for (const char *line = text; *line != '\0';) {
		const char *nl = strchr(line, '\n');
		size_t n;
		int arena, used = 0;

		CHECK(nl != NULL, "malloc_stats text ends without a newline: %s", line);
		n = (size_t)(nl - line);
		if (strncmp(line, "Total (incl. mmap):\n", 20) == 0) {
			totals++;
			row = 0;
		} else if (sscanf(line, "Arena %d:%n", &arena, &used) == 1 && (size_t)used == n) {
			row = -1;
		} else {
			int found = -1;

			for (int i = 0; i < 4; i++)
				if (strncmp(line, labels[i], 19) == 0)
					found = i;
			CHECK(found >= 0 && n == 29 && line[19 + 9] != ' ',
			      "not a line of glibc's malloc_stats: %.*s", (int)n, line);
			if (row >= 0) {
				unsigned long v = strtoul(line + 19, NULL, 10);

				CHECK(found == row, "total line %d is %.*s", row, (int)n, line);
				if (row == 0)
					t->system = v;
				else if (row == 1)
					t->in_use = v;
				else if (row == 2)
					t->max_regions = v;
				else
					t->max_bytes = v;
				row = row == 3 ? -1 : row + 1;
			}
		}
		line = nl + 1;
	}
	return totals;
}

/* malloc_stats' text, written where the program's stderr goes: its
 * descriptor 2 (a log file), or the variable stderr assigned a stream of
 * the program's (glibc writes to whichever stderr points at). */
static void stats_text(bool assign, char *text, size_t size)
{
	FILE *f = tmpfile();
	size_t n;

	CHECK(f != NULL, "tmpfile: %s", strerror(errno));
	if (assign) {
		FILE *saved = stderr;

		stderr = f;
		malloc_stats();
		stderr = saved;
	} else {
		int saved = dup(2);

		CHECK(saved >= 0 && dup2(fileno(f), 2) == 2, "dup2: %s", strerror(errno));
		malloc_stats();
		CHECK(dup2(saved, 2) == 2 && close(saved) == 0, "dup2 back: %s", strerror(errno));
	}
	rewind(f);
	n = fread(text, 1, size - 1, f);
	text[n] = '\0';
	fclose(f);
}

static struct stats_total stats_total(bool assign)
{
	static char text[TEXT_MAX];
	struct stats_total t = { 0 };

	stats_text(assign, text, sizeof(text));
	CHECK(strncmp(text, "Arena 0:\n", 9) == 0, "malloc_stats starts: %.20s", text);
	CHECK(parse_stats(text, &t) == 1, "malloc_stats text has not one total:\n%s", text);
	return t;
}

static int check_stats_counts(bool assign)
{
	struct stats_total before = stats_total(assign), live, after;
	char *p = hostile_keep(malloc(TEXT_BLOCK));

	CHECK(p != NULL, "malloc: %s", strerror(errno));
	memset(p, 1, TEXT_BLOCK);
	live = stats_total(assign);
	free(p);
	after = stats_total(assign);
	CHECK(live.in_use - before.in_use >= TEXT_BLOCK && live.system - before.system >= TEXT_BLOCK,
	      "total in use %lu -> %lu MiB, system %lu -> %lu MiB with a %zu MiB block live",
	      before.in_use >> 20, live.in_use >> 20, before.system >> 20, live.system >> 20,
	      TEXT_BLOCK >> 20);
	CHECK(live.max_regions >= 1 && live.max_bytes >= TEXT_BLOCK,
	      "max mmap regions %lu, bytes %lu MiB with a %zu MiB block live", live.max_regions,
	      live.max_bytes >> 20, TEXT_BLOCK >> 20);
	CHECK(live.in_use - after.in_use >= TEXT_BLOCK,
	      "total in use %lu MiB with the block live, %lu MiB after its free",
	      live.in_use >> 20, after.in_use >> 20);
	CHECK(after.max_bytes >= live.max_bytes, "max mmap bytes fell at free: %lu -> %lu",
	      live.max_bytes, after.max_bytes);
	return 0;
}

static int stats_counts(void)
{
	return check_stats_counts(false);
}

static int stats_counts_assigned(void)
{
	return check_stats_counts(true);
}

/* Another thread writes to stderr all along: none of its lines is lost or
 * out of order, and malloc_stats' texts stay whole lines. (Its lines may
 * come between malloc_stats' lines: glibc 2.36 lets them, in about half
 * of the runs here, though it locks stderr.) */
#define WRITER_LINES 20000
#define STATS_CALLS 50

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < WRITER_LINES; i++)
		fprintf(stderr, "writer %d\n", i);
	return NULL;
}

static int stats_with_writer(void)
{
	static char text[16 << 20];
	struct stats_total t = { 0 };
	char *p = hostile_keep(malloc(TEXT_BLOCK));
	FILE *f = tmpfile();
	int saved = dup(2), lines = 0, next = 0;
	pthread_t thread;
	size_t n;

	CHECK(p != NULL && f != NULL, "malloc or tmpfile: %s", strerror(errno));
	memset(p, 1, TEXT_BLOCK);
	CHECK(saved >= 0 && dup2(fileno(f), 2) == 2, "dup2: %s", strerror(errno));
	CHECK(pthread_create(&thread, NULL, writer, NULL) == 0, "pthread_create");
	for (int i = 0; i < STATS_CALLS; i++)
		malloc_stats();
	pthread_join(thread, NULL);
	CHECK(dup2(saved, 2) == 2 && close(saved) == 0, "dup2 back: %s", strerror(errno));
	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	free(p);
	/* The writer's lines, in order, taken out; what is left must be
	 * malloc_stats' texts whole, one after the other. */
	{
		char *out = text;

		for (char *line = text; *line != '\0';) {
			char *nl = strchr(line, '\n');
			size_t len = nl != NULL ? (size_t)(nl - line) + 1 : strlen(line);
			int i;

			if (sscanf(line, "writer %d", &i) == 1) {
				CHECK(i == next, "writer line %d where %d was due", i, next);
				next++;
				lines++;
			} else {
				memmove(out, line, len);
				out += len;
			}
			line += len;
		}
		*out = '\0';
	}
	CHECK(lines == WRITER_LINES, "%d of the writer's %d lines in stderr", lines, WRITER_LINES);
	CHECK(parse_stats(text, &t) == STATS_CALLS, "not %d totals in stderr", STATS_CALLS);
	CHECK(t.in_use >= TEXT_BLOCK, "total in use %lu MiB with a %zu MiB block live",
	      t.in_use >> 20, TEXT_BLOCK >> 20);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "info", info_counts },
		{ "stats", stats_counts },
		{ "stats_assigned", stats_counts_assigned },
		{ "stats_writer", stats_with_writer },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
