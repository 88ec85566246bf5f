/* See harness.h. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blocks.h"
#include "blocks_view.h"
#include "check.h"
#include "harness.h"
#include "recycle.h"

#define PAGE ((size_t)4096)

static void fault_resolve(struct hz_next *next)
{
	next->next_malloc = malloc;
	next->next_free = free;
	next->next_calloc = calloc;
	next->next_realloc = realloc;
	next->next_posix_memalign = posix_memalign;
	next->next_aligned_alloc = aligned_alloc;
	next->next_memalign = memalign;
	next->next_valloc = valloc;
	next->next_pvalloc = pvalloc;
	next->next_malloc_usable_size = malloc_usable_size;
	next->next_mmap = mmap;
	next->next_munmap = munmap;
	next->next_mremap = mremap;
	next->next_pthread_create = pthread_create;
}

void fault_start(void)
{
	struct hz_next next;

	fault_resolve(&next);
	hz_preload_start(&next);
}

/* ---- footprint ---- */

static char maps[1 << 18];

static size_t read_maps(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t used = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	while (used + 1 < sizeof(maps) &&
	       (n = read(fd, maps + used, sizeof(maps) - 1 - used)) > 0)
		used += (size_t)n;
	close(fd);
	maps[used] = '\0';
	return used;
}

static bool special(const char *line)
{
	const char *nl = strchr(line, '\n');
	size_t len = nl ? (size_t)(nl - line) : strlen(line);

	for (const char *name = line; name < line + len; name++)
		if (*name == '[')
			return true; /* [heap], [stack], [vdso], [vvar]... */
	return false;
}

/* Bytes of [s, e) outside every region held, less nothing else. */
static size_t outside_regions(uintptr_t s, uintptr_t e, const struct hz_blocks_view *v)
{
	size_t bytes = e - s;

	for (size_t k = 0; k < HZ_REGIONS_MAX; k++) {
		struct hz_range r = hz_range_clamp((struct hz_range){ s, e }, v->regions[k].range);

		bytes -= hz_range_len(r);
	}
	return bytes;
}

/* The regions' own tables: hugezero's bookkeeping, mapped with each region. */
static size_t table_bytes(const struct hz_blocks_view *v)
{
	size_t bytes = 0;

	for (size_t k = 0; k < HZ_REGIONS_MAX; k++)
		if (!hz_range_empty(v->regions[k].range))
			bytes += hz_block_region_table_bytes(v->regions[k].granules);
	return bytes;
}

void footprint_take(struct footprint *f)
{
	const char *line = maps;
	struct hz_blocks_view v;

	read_maps();
	hz_blocks_view_begin(&v);
	f->outside_bytes = 0;
	while (*line) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && !special(line))
			f->outside_bytes += outside_regions(s, e, &v);
		line = strchr(line, '\n');
		if (line == NULL)
			break;
		line++;
	}
	f->outside_bytes -= table_bytes(&v);
	hz_blocks_view_end();
	f->glibc_mmapped = mallinfo2().hblkhd;
}

static size_t resident_in(uintptr_t start, size_t len)
{
	static unsigned char vec[64 * MiB / PAGE];
	size_t bytes = 0;

	if (mincore((void *)start, len, vec) != 0) {
		/* ENOMEM: a hole somewhere (mremap left one), which holds
		 * nothing; look closer. */
		if (len > HZ_GRANULE)
			for (size_t off = 0; off < len; off += HZ_GRANULE)
				bytes += resident_in(start + off, HZ_GRANULE);
		return bytes;
	}
	for (size_t i = 0; i < len / PAGE; i++)
		bytes += (vec[i] & 1) * PAGE;
	return bytes;
}

size_t reservation_resident(void)
{
	size_t bytes = 0;

	struct hz_range r;

	for (size_t i = 0; hz_blocks_region(i, &r); i++)
		for (uintptr_t a = r.start; a < r.end; a += 64 * MiB)
			bytes += resident_in(a, 64 * MiB);
	return bytes;
}

unsigned thread_count(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "\nThreads:");
	return p ? (unsigned)strtoul(p + 9, NULL, 10) : 0;
}

/* ---- checks ---- */

static void visit_clean(const struct hz_span *span, bool clean, void *ctx)
{
	const unsigned char *p = (const unsigned char *)span->range.start;
	unsigned *problems = ctx;

	if (!clean)
		return;
	for (size_t off = 0; off < hz_span_bytes(span); off += PAGE) {
		if (p[off] != 0 || memcmp(p + off, p + off + 1, PAGE - 1) != 0) {
			fprintf(stderr, "check: clean cached span %p has a non-zero byte at +%zu\n",
				(void *)p, off);
			++*problems;
			return;
		}
	}
}

/* Wait for the pre-zero thread, which may be releasing spans it took out
 * of the cache for decay (it runs at idle priority: give it up to 2 s):
 * until nothing is claimed or, when orphans are allowed, until the count
 * has not changed for 20 ms. */
static void settle(struct hz_blocks_census *bc, bool orphans_allowed, unsigned *problems)
{
	const struct timespec nap = { 0, 1000000 };
	int unchanged = 0;

	for (int tries = 0; tries < 2000 && bc->claimed_granules > 0; tries++) {
		struct hz_blocks_census again;

		nanosleep(&nap, NULL);
		if (hz_blocks_check(&again) != 0) {
			++*problems;
			return;
		}
		unchanged = again.claimed_granules == bc->claimed_granules ? unchanged + 1 : 0;
		*bc = again;
		if (orphans_allowed && unchanged >= 20)
			return;
	}
}

unsigned check_quiescent(const struct footprint *base, size_t extra_outside,
			 bool orphans_allowed, size_t *orphans)
{
	struct hz_blocks_census bc;
	struct hz_recycle_census rc;
	struct footprint now;
	unsigned problems = 0;
	size_t resident;

	if (hz_blocks_check(&bc) != 0)
		problems++;
	if (hz_recycle_check(&rc, visit_clean, &problems) != 0)
		problems++;
	if (bc.live_blocks != 0) {
		fprintf(stderr, "check: %zu blocks still live after everything was freed\n",
			bc.live_blocks);
		problems++;
	}
	hz_recycle_drain();
	if (hz_blocks_check(&bc) != 0)
		problems++;
	settle(&bc, orphans_allowed, &problems);
	*orphans = bc.claimed_granules;
	if (bc.claimed_granules != 0 && !orphans_allowed) {
		fprintf(stderr, "check: %zu granules still claimed with the cache drained\n",
			bc.claimed_granules);
		problems++;
	}
	resident = reservation_resident();
	if (resident != 0) {
		fprintf(stderr, "check: %zu bytes resident in the reservation with nothing live\n",
			resident);
		problems++;
	}
	footprint_take(&now);
	/* extra_outside is what failed munmaps were asked to unmap: a probe's
	 * whole mapping stays (a real munmap of a whole mapping cannot fail),
	 * a failed trim is undone by other means. */
	if (now.outside_bytes < base->outside_bytes ||
	    now.outside_bytes > base->outside_bytes + extra_outside) {
		fprintf(stderr, "check: %zu bytes mapped outside the reservation, %zu at the start "
			"(+%zu allowed)\n", now.outside_bytes, base->outside_bytes, extra_outside);
		problems++;
	}
	if (now.glibc_mmapped != base->glibc_mmapped) {
		fprintf(stderr, "check: glibc holds %zu mmapped bytes, %zu at the start\n",
			now.glibc_mmapped, base->glibc_mmapped);
		problems++;
	}
	return problems;
}

/* ---- children ---- */

static void print_log(int fd, const char *what, int status)
{
	char buf[4096];
	ssize_t n;

	fprintf(stderr, "---- %s: %s %d; its messages:\n", what,
		status < 0 ? "killed by signal" : "exit status", status < 0 ? -status : status);
	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stderr);
	fprintf(stderr, "---- end of %s\n", what);
}

int child_run(int (*fn)(void *arg), void *arg, const char *what)
{
	int log = memfd_create("fault-child", MFD_CLOEXEC), status;
	pid_t pid;

	if (log < 0)
		return -SIGABRT;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(log);
		return -SIGABRT;
	}
	if (pid == 0) {
		dup2(log, STDERR_FILENO);
		/* A hang is a failure, not a stuck test. */
		alarm(20);
		status = fn(arg);
		fflush(NULL);
		_exit(status);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
	if (status != CHILD_OK && status != CHILD_NOT_REACHED && status != CHILD_SKIPPED)
		print_log(log, what, status);
	close(log);
	return status;
}

void scenario_env(const char *const *extra)
{
	static const char *const base[] = {
		"HUGEZERO_THRESHOLD=256K", "HUGEZERO_RESERVE=4G", "HUGEZERO_CACHE_MAX=48M",
		"HUGEZERO_DECAY_MS=1000", "HUGEZERO_PREZERO=sync", "HUGEZERO_PREZERO_UNIT=4M",
		"HUGEZERO_EXEC=off", "HUGEZERO_VERBOSE=0", "HUGEZERO_BACKING=auto",
		"HUGEZERO_THP_CHECK=1", "HUGEZERO_MMAP=1", "HUGEZERO_POPULATE=0",
		"HUGEZERO_ZERO_ON_FREE=0", "HUGEZERO_STATS=0", NULL,
	};

	for (int pass = 0; pass < 2; pass++) {
		const char *const *list = pass == 0 ? base : extra;

		for (; list && *list; list++) {
			char name[64];
			const char *eq = strchr(*list, '=');

			if (eq == NULL || (size_t)(eq - *list) >= sizeof(name))
				continue;
			memcpy(name, *list, (size_t)(eq - *list));
			name[eq - *list] = '\0';
			setenv(name, eq + 1, 1);
		}
	}
}
