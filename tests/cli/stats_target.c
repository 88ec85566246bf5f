/* A process for `hugezero stats PID` to read (tests/cli.sh): run under the
 * preload, it makes large blocks of each kind the report counts (malloc,
 * calloc, one freed and one served again from the cache), prints "ready",
 * and waits until its stdin closes (a pipe), then exits 0.
 *
 *   stats_target            as above
 *   stats_target other-layout
 *                           first raises the layout number in its own stats
 *                           header, so the tool sees another version's
 *   stats_target other-table
 *                           first changes the table hash (and the version
 *                           string): another version's counters
 *   stats_target cleared    as above, then frees the calloc'd block and
 *                           callocs it again: run with HUGEZERO_PREZERO=sync,
 *                           calloc clears the reused block itself, so a time
 *                           counter (clear_ns) is not 0 (openmetrics.sh)
 *   stats_target two-freed  as above, then frees a 32 MiB and the 16 MiB
 *                           block and asks for 32 MiB again: served from
 *                           the cache with the 16 MiB block still in it
 *                           (tests/containers.sh, a limit that cannot be
 *                           read)
 *   stats_target blocks N MIB
 *                           instead makes N blocks of MIB MiB and writes
 *                           every byte (tests/containers.sh, the pod's
 *                           hugetlb limit), then prints "ready" and waits
 *
 * It finds its header as the tool does without mapping names: the magic at
 * the start of a page of libhugezero's writable mappings (or the anonymous
 * one after them), with self pointing there. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

#define MIB ((size_t)1 << 20)

static struct hz_stats_header *find_header(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[1024];
	uintptr_t lib_end = 0;
	struct hz_stats_header *found = NULL;

	if (maps == NULL)
		return NULL;
	while (!found && fgets(line, sizeof(line), maps)) {
		uintptr_t start, end;
		char perms[8] = "", path[512] = "";
		unsigned long long off, inode;
		char *base;

		/* start 0: never a mapping of ours (and never dereferenced). */
		if (sscanf(line, "%lx-%lx %7s %llx %*s %llu %511s", &start, &end, perms, &off,
			   &inode, path) < 5 || start == 0)
			continue;
		base = strrchr(path, '/');
		base = base ? base + 1 : path;
		if (perms[1] == 'w' && (strncmp(base, "libhugezero", 11) == 0 ||
					strcmp(path, "[anon:" HZ_STATS_MAPPING_NAME "]") == 0 ||
					(path[0] == '\0' && start == lib_end)))
			for (uintptr_t a = start; a < end && !found; a += HZ_STATS_PAGE) {
				struct hz_stats_header *h = (struct hz_stats_header *)a;

				if (h->magic == HZ_STATS_MAGIC && h->self == a)
					found = h;
			}
		lib_end = strncmp(base, "libhugezero", 11) == 0 ? end : 0;
	}
	fclose(maps);
	return found;
}

/* volatile: the allocations must happen (clang removes a malloc whose
 * memory nothing reads). */
static char *volatile blocks[4];

static void wait_for_eof(void)
{
	char c;

	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
}

/* stats_target blocks N MIB: N written blocks of MIB MiB, freed at the end
 * (volatile, as blocks above). */
static int sized_blocks(int n, size_t mib)
{
	char *volatile *held = n > 0 ? calloc((size_t)n, sizeof(*held)) : NULL;
	int made = 0;
	bool ok;

	for (; held != NULL && mib > 0 && made < n; made++) {
		held[made] = malloc(mib * MIB);
		if (held[made] == NULL)
			break;
		memset(held[made], 1, mib * MIB);
	}
	ok = held != NULL && made == n && mib > 0;
	if (ok)
		wait_for_eof();
	for (int i = 0; i < made; i++)
		free(held[i]);
	free((void *)held);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 3 && strcmp(argv[1], "blocks") == 0)
		return sized_blocks(atoi(argv[2]), strtoull(argv[3], NULL, 10));
	for (int i = 0; i < 4; i++) {
		blocks[i] = i == 3 ? calloc(1, 16 * MIB) : malloc(32 * MIB);
		if (blocks[i] == NULL)
			return 1;
		memset(blocks[i], 1, 16 * MIB);
	}
	free(blocks[0]);
	blocks[0] = malloc(32 * MIB); /* from the cache */
	if (argc > 1 && strcmp(argv[1], "cleared") == 0) {
		free(blocks[3]);
		blocks[3] = calloc(1, 16 * MIB);
		if (blocks[3] == NULL)
			return 1;
		argc = 1;
	} else if (argc > 1 && strcmp(argv[1], "two-freed") == 0) {
		free(blocks[1]);
		free(blocks[3]);
		blocks[3] = NULL;
		blocks[1] = malloc(32 * MIB);
		if (blocks[1] == NULL)
			return 1;
		argc = 1;
	}
	if (argc > 1) {
		struct hz_stats_header *h = find_header();

		if (h == NULL) {
			fprintf(stderr, "stats_target: no stats header of our own\n");
			return 1;
		}
		if (strcmp(argv[1], "other-layout") == 0) {
			h->layout++;
		} else {
			h->table_hash++;
			snprintf(h->version, sizeof(h->version), "9.8.7");
		}
	}
	wait_for_eof();
	for (int i = 0; i < 4; i++)
		free(blocks[i]);
	return 0;
}
