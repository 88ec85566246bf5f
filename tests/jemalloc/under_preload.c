/* A jemalloc program under libhugezero-preload.so that also uses a hooked
 * arena: the preload serves its large malloc()s, the hooks its arena, and
 * each pointer goes back to the allocator that made it, even through
 * free(), realloc() and malloc_usable_size(), which jemalloc allows on
 * mallocx() pointers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

static void hooked_pointers_survive_the_preloads_free_and_realloc(void **state)
{
	const char *preload = getenv("LD_PRELOAD");
	int flags;
	unsigned ind;
	char *p, *q, *big;

	(void)state;
	if (!preload || !strstr(preload, "hugezero"))
		fail_msg("run this test under libhugezero-preload.so");
	assert_int_equal(hz_jemalloc_create_arena(&ind), 0);
	flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	big = malloc(8 * MiB); /* the preload's */
	assert_non_null(big);
	memset(big, 3, 8 * MiB);
	for (int i = 0; i < 20; i++) {
		p = mallocx(6 * MiB + 4 * KiB, flags | MALLOCX_ZERO);
		assert_non_null(p);
		assert_true(all_bytes(p, 6 * MiB + 4 * KiB, 0));
		memset(p, 0x5a, 6 * MiB + 4 * KiB);
		assert_true(malloc_usable_size(p) >= 6 * MiB + 4 * KiB);
		q = realloc(p, 9 * MiB); /* jemalloc's realloc, not the preload's */
		assert_non_null(q);
		assert_true(all_bytes(q, 6 * MiB + 4 * KiB, 0x5a));
		free(q);
	}
	assert_true(all_bytes(big, 8 * MiB, 3));
	free(big);
	assert_int_equal(arena_ctl(ind, "destroy"), 0);
}

/* Whether p lies in an arena that carries hugezero's hooks ("arenas.lookup"
 * gives its arena, "arena.<i>.extent_hooks" that arena's hooks). */
static bool hooked(void *p)
{
	unsigned ind;
	size_t len = sizeof(ind);
	extent_hooks_t *hooks = NULL;
	char name[64];

	if (mallctl("arenas.lookup", &ind, &len, &p, sizeof(p)) != 0)
		return false;
	snprintf(name, sizeof(name), "arena.%u.extent_hooks", ind);
	len = sizeof(hooks);
	return mallctl(name, &hooks, &len, NULL, 0) == 0 && hooks == hz_jemalloc_hooks();
}

/* Every large entry point of the preload, in a jemalloc program: the
 * pointer is jemalloc's (sallocx, xallocx, rallocx, sdallocx, dallocx and
 * free work on it), from an arena with hugezero's hooks. */
static void *large_entry_points_are_jemallocs_and_hooked(void *arg)
{
	size_t n;
	char *p = malloc(5 * MiB), *q, *a = NULL;

	(void)arg;
	assert_non_null(p);
	memset(p, 0x11, 5 * MiB);
	assert_true(sallocx(p, 0) >= 5 * MiB);
	assert_true(hooked(p));
	n = xallocx(p, 7 * MiB, 0, 0);
	assert_int_equal(n, sallocx(p, 0));
	q = calloc(3, 2 * MiB);
	assert_non_null(q);
	assert_true(hooked(q));
	assert_true(all_bytes(q, 6 * MiB, 0));
	assert_int_equal(malloc_usable_size(q), sallocx(q, 0));
	q = realloc(q, 11 * MiB);
	assert_non_null(q);
	assert_true(hooked(q));
	assert_true(all_bytes(q, 6 * MiB, 0));
	q = rallocx(q, 4 * MiB, 0);
	assert_non_null(q);
	assert_int_equal(posix_memalign((void **)&a, 2 * MiB, 3 * MiB), 0);
	assert_int_equal((uintptr_t)a % (2 * MiB), 0);
	assert_true(hooked(a));
	assert_true(sallocx(a, 0) >= 3 * MiB);
	assert_true(all_bytes(p, 5 * MiB, 0x11));
	sdallocx(a, 3 * MiB, 0);
	/* The rest of the aligned family, routed with posix_memalign
	 * (malloc.c): each pointer hooked, aligned and freed by jemalloc. */
	for (int i = 0; i < 4; i++) {
		size_t size = i == 0 ? 4 * MiB : 3 * MiB + 1;

		a = i == 0 ? aligned_alloc(4 * MiB, size)
		    : i == 1 ? memalign(4 * MiB, size)
		    : i == 2 ? valloc(size)
			     : pvalloc(size);
		assert_non_null(a);
		assert_int_equal((uintptr_t)a % (i < 2 ? 4 * MiB : 4 * KiB), 0);
		assert_true(hooked(a));
		assert_true(sallocx(a, 0) >= size);
		free(a);
	}
	dallocx(q, 0);
	free(p);
	/* Small requests stay on jemalloc's own arenas. */
	p = malloc(100);
	assert_non_null(p);
	assert_false(hooked(p));
	free(p);
	return NULL;
}

static void large_requests_come_from_the_hooks_on_every_thread_and_after_fork(void **state)
{
	pthread_t t[4];

	large_entry_points_are_jemallocs_and_hooked(NULL);
	pid_t pid;
	int status;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL,
						large_entry_points_are_jemallocs_and_hooked, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		large_entry_points_are_jemallocs_and_hooked(NULL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* 4 KiB pages of [p, p + len) resident (mincore; huge pages count whole). */
static size_t resident_pages(const char *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095, hi = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
	static unsigned char vec[(64 * MiB) / 4096];
	size_t n = (hi - lo) / 4096, count = 0;

	assert_true(n <= sizeof(vec));
	assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	return count;
}

/* The preload's arena starts its extents on 4 KiB pages (jemalloc/extents.h):
 * a large value barely touched costs the pages touched, as under jemalloc
 * alone, where huge pages at once made each touched 2 MiB resident whole.
 * First in the group: an extent freed earlier would come back resident. */
static void barely_touched_large_values_stay_on_small_pages(void **state)
{
	enum { N = 16, SIZE = 4 * MiB, STEP = 256 * KiB };
	char *p[N];
	size_t resident = 0, touched = (size_t)N * (SIZE / STEP);

	(void)state;
	if (!hz_test_thp_mode_is("[madvise]") || !thp_usable() ||
	    option_set("HUGEZERO_BACKING") || option_set("HUGEZERO_LAZY_THP") ||
	    option_set("HUGEZERO_POPULATE") || option_set("HUGEZERO_PREZERO")) {
		print_message("[  SKIP    ] THP is not in madvise mode, or HUGEZERO_BACKING, "
			      "LAZY_THP, POPULATE or PREZERO is set: extents may not be lazy then\n");
		skip();
	}
	for (int i = 0; i < N; i++) {
		p[i] = malloc(SIZE);
		assert_non_null(p[i]);
		assert_true(hooked(p[i]));
		for (size_t off = 0; off < SIZE; off += STEP)
			p[i][off] = 1;
	}
	for (int i = 0; i < N; i++)
		resident += resident_pages(p[i], SIZE);
	print_message("%zu KiB resident for %zu pages of 4 KiB touched in %d MiB\n",
		      resident * 4, touched, N * SIZE / (int)MiB);
	assert_true(resident >= touched);
	assert_true(resident <= 2 * touched);
	for (int i = 0; i < N; i++)
		free(p[i]);
}

static ssize_t dirty_decay_ms_of(void *p)
{
	unsigned ind;
	size_t len = sizeof(ind);
	ssize_t ms = -2;
	char name[64];

	assert_int_equal(mallctl("arenas.lookup", &ind, &len, &p, sizeof(p)), 0);
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", ind);
	len = sizeof(ms);
	assert_int_equal(mallctl(name, &ms, &len, NULL, 0), 0);
	return ms;
}

static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long size = 0, resident = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
	fclose(f);
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* As under jemalloc alone, values of opt.oversize_threshold (8 MiB) and
 * more come from an arena that hands them back once freed (to hugezero's
 * extents, which keep them for reuse only within the program's recent
 * demand), the others from one that keeps them for jemalloc's decay. A
 * program that cycles values of varying sizes, written whole, then peaks
 * near its live bytes: with one arena for all sizes, jemalloc kept the old
 * values beside the new ones and the peak was 1.95x the live bytes (1.00x
 * under jemalloc alone, 1.13x now). */
static void cycled_values_of_varying_sizes_cost_about_their_peak(void **state)
{
	enum { SLOTS = 4, ROUNDS = 60 };
	size_t oversize = 0, len = sizeof(oversize), size[SLOTS] = { 0 }, live = 0, peak = 0;
	size_t base = rss_bytes(), most = 0;
	char *v[SLOTS] = { NULL }, *small;
	unsigned seed = 7;

	(void)state;
	if (mallctl("opt.oversize_threshold", &oversize, &len, NULL, 0) != 0 ||
	    oversize < 4 * MiB || oversize > 8 * MiB) {
		print_message("[  SKIP    ] this jemalloc has no oversize arena of 4-8 MiB\n");
		skip();
	}
	small = malloc(oversize / 2); /* large for the preload (2 MiB), not oversize */
	assert_true(hooked(small));
	assert_true(dirty_decay_ms_of(small) != 0);
	free(small);
	for (int i = 0; i < ROUNDS; i++) {
		int k = i % SLOTS;
		size_t rss;

		free(v[k]);
		live -= size[k];
		size[k] = oversize + (rand_r(&seed) % 9) * MiB + (rand_r(&seed) % 64) * 4 * KiB;
		v[k] = malloc(size[k]);
		assert_non_null(v[k]);
		assert_true(hooked(v[k]));
		assert_int_equal(dirty_decay_ms_of(v[k]), 0);
		memset(v[k], i, size[k]);
		live += size[k];
		peak = live > peak ? live : peak;
		rss = rss_bytes();
		most = rss > most ? rss : most;
	}
	print_message("peak %zu KiB over %zu KiB of live values at most\n",
		      (most - base) >> 10, peak >> 10);
	assert_true(most - base <= peak + peak / 4);
	for (int k = 0; k < SLOTS; k++)
		free(v[k]);
}

/* The hooks hand an extent out dirty unless jemalloc asks for it zeroed
 * (src/jemalloc/extents.c): a calloc after values were written and freed,
 * of the same sizes on both arenas (below and at opt.oversize_threshold),
 * reads zero; a value grown by realloc over such pages keeps its bytes,
 * and the calloc after it reads zero again. */
static void callocs_over_freed_written_values_read_zero(void **state)
{
	static const size_t sizes[] = { 3 * MiB, 5 * MiB + 12 * KiB, 8 * MiB, 12 * MiB + 4 * KiB };

	(void)state;
	for (int round = 0; round < 8; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			size_t n = sizes[i];
			char *v = malloc(n), *z;

			assert_non_null(v);
			assert_true(hooked(v));
			memset(v, 0xa5, n);
			free(v);
			z = calloc(1, n);
			assert_non_null(z);
			assert_true(hooked(z));
			assert_true(all_bytes(z, n, 0));
			memset(z, 0x5a, n);
			free(z);
			v = malloc(n / 2);
			assert_non_null(v);
			memset(v, 0x3c, n / 2);
			z = realloc(v, n + n / 2);
			assert_non_null(z);
			assert_true(all_bytes(z, n / 2, 0x3c));
			free(z);
			z = calloc(n / MiB, MiB);
			assert_non_null(z);
			assert_true(all_bytes(z, (n / MiB) * MiB, 0));
			free(z);
		}
}

/* The arena's dirty pages (stats.arenas.<i>.pdirty, refreshed). */
static bool dirty_pages(unsigned ind, size_t *pages)
{
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);
	char name[64];

	snprintf(name, sizeof(name), "stats.arenas.%u.pdirty", ind);
	if (mallctl("epoch", &epoch, &len, &epoch, len) != 0)
		return false;
	len = sizeof(*pages);
	return mallctl(name, pages, &len, NULL, 0) == 0;
}

/* jemalloc decays an arena on ticks of its own requests (one in about a
 * thousand), and the preload's arena for values under
 * opt.oversize_threshold sees only large requests: its freed values stayed
 * dirty long past its decay time. The preload's large requests make it
 * decay on time (src/preload/jemalloc_next.c): with its decay time set to
 * 100 ms, two values a stay tick (250 ms) apart find the eight freed
 * before them purged. */
static void freed_values_decay_on_time_in_an_arena_of_few_requests(void **state)
{
	enum { N = 8 };
	size_t oversize = 0, len = sizeof(oversize), size, before = 0, after = 0;
	ssize_t ms = 100, old_ms;
	unsigned ind;
	char name[64], *v[N], *probe;

	(void)state;
	if (mallctl("opt.oversize_threshold", &oversize, &len, NULL, 0) != 0 ||
	    oversize < 4 * MiB || oversize > 8 * MiB) {
		print_message("[  SKIP    ] this jemalloc has no oversize arena of 4-8 MiB\n");
		skip();
	}
	size = oversize / 2; /* large for the preload (2 MiB), not oversize */
	probe = malloc(size);
	assert_true(hooked(probe));
	len = sizeof(ind);
	assert_int_equal(mallctl("arenas.lookup", &ind, &len, &probe, sizeof(probe)), 0);
	old_ms = dirty_decay_ms_of(probe);
	free(probe);
	if (!dirty_pages(ind, &before)) {
		print_message("[  SKIP    ] this jemalloc keeps no per-arena stats\n");
		skip();
	}
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", ind);
	assert_int_equal(mallctl(name, NULL, NULL, &ms, sizeof(ms)), 0);
	for (int i = 0; i < N; i++) {
		v[i] = malloc(size);
		assert_non_null(v[i]);
		memset(v[i], i + 1, size);
	}
	for (int i = 0; i < N; i++)
		free(v[i]);
	assert_true(dirty_pages(ind, &before));
	/* jemalloc counts pages freed since its last look as freed at that
	 * look: the first request after the stay tick finds them, the next
	 * one purges them. */
	for (int look = 0; look < 2; look++) {
		usleep(300 * 1000);
		probe = malloc(size);
		assert_non_null(probe);
		if (look == 1)
			assert_true(dirty_pages(ind, &after));
		free(probe);
	}
	assert_int_equal(mallctl(name, NULL, NULL, &old_ms, sizeof(old_ms)), 0);
	print_message("dirty pages of the arena: %zu after the frees, %zu after the decay time\n",
		      before, after);
	assert_true(before >= (N - 1) * (size / 4096));
	assert_true(after < size / 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(barely_touched_large_values_stay_on_small_pages),
		cmocka_unit_test(cycled_values_of_varying_sizes_cost_about_their_peak),
		cmocka_unit_test(callocs_over_freed_written_values_read_zero),
		cmocka_unit_test(hooked_pointers_survive_the_preloads_free_and_realloc),
		cmocka_unit_test(large_requests_come_from_the_hooks_on_every_thread_and_after_fork),
		cmocka_unit_test(freed_values_decay_on_time_in_an_arena_of_few_requests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
