/* dlopen/dlclose in a loop with HUGEZERO_EXEC on (advise or remap), while
 * two threads allocate and another loads and unloads a second copy of the
 * library at the same time: the generated 6 MiB-text library of tests/exec
 * (gen.h) is loaded, every function run and checked, and unloaded, cold
 * (dropped from the page cache, so the prewarm runs) every other time.
 * Every tenth round a child forks while the library is loaded, runs it,
 * unloads it and loads it again itself (hugezero's dlopen lock was reset
 * in the child). The loop must not leak mappings, and under the preload
 * the library's text must carry hugezero's advice (VmFlags hg), which a
 * glibc run must not: the check is honest. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../exec/gen.h"
#include "stress.h"

#define CHILD_SECONDS 20
/* Mappings the loop may add for good (malloc arenas, the load threads'
 * blocks): far fewer than one per round. */
#define MAPS_SLACK 24

static char workdir[] = "/tmp/hz-stress-dlopen-XXXXXX";
static char lib[256], lib_b[256], source[256];

static int setup(void **state)
{
	const char *cc = getenv("HZ_CC");

	(void)state;
	if (cc == NULL) {
		fprintf(stderr, "HZ_CC (a C compiler) is not set\n");
		return -1;
	}
	if (mkdtemp(workdir) == NULL)
		return -1;
	snprintf(lib, sizeof(lib), "%s/libhzgen.so", workdir);
	snprintf(lib_b, sizeof(lib_b), "%s/libhzgen-b.so", workdir);
	snprintf(source, sizeof(source), "%s/gen.c", workdir);
	if (hz_gen_build(cc, workdir, HZ_GEN_FUNCTIONS) != 0)
		return -1;
	return hz_gen_copy_cold(lib, lib_b) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(lib);
	unlink(lib_b);
	unlink(source);
	return rmdir(workdir);
}

static unsigned count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned n = 0;
	int c;

	if (f == NULL)
		return 0;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

struct text {
	unsigned exec_maps; /* executable mappings of the library's file */
	unsigned advised;   /* ... with VmFlags hg (MADV_HUGEPAGE) */
	unsigned moved;     /* anonymous executable mappings amid them: remapped text */
};

/* Anonymous executable mappings looked at, at most. */
#define ANON_MAX 64

static void text_flags(struct text *t)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long anon[ANON_MAX][2], low = ~0ul, high = 0;
	unsigned anon_count = 0;
	char line[512];
	bool ours = false;

	memset(t, 0, sizeof(*t));
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		char perms[8];
		int name = 0;

		/* A mapping's first line: "start-end perms offset dev inode name". */
		if (sscanf(line, "%lx-%lx %7s %*x %*s %*u %n", &start, &end, perms, &name) == 3) {
			ours = strstr(line, lib) != NULL && perms[2] == 'x';
			t->exec_maps += ours;
			if (ours) {
				low = start < low ? start : low;
				high = end > high ? end : high;
			}
			if (perms[2] == 'x' && name > 0 && line[name] == '\0' &&
			    anon_count < ANON_MAX) {
				anon[anon_count][0] = start;
				anon[anon_count++][1] = end;
			}
		} else if (ours && strncmp(line, "VmFlags:", 8) == 0) {
			t->advised += strstr(line, " hg") != NULL;
		}
	}
	fclose(f);
	for (unsigned i = 0; i < anon_count; i++)
		t->moved += anon[i][0] >= low && anon[i][1] <= high;
}

/* ---- the second copy, loaded and unloaded meanwhile ---- */

static int other_stop;
static unsigned other_rounds, other_bad;
/* Held by the second loader in dlopen and dlclose: a fork while another
 * thread is inside them leaves the child's loader state inconsistent with
 * glibc alone (ld.so asserts r_state == RT_CONSISTENT in the child's next
 * dlopen), so the forks wait for it. */
static pthread_mutex_t loader_mutex = PTHREAD_MUTEX_INITIALIZER;

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void *other_loader(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&other_stop, __ATOMIC_ACQUIRE)) {
		void *h;

		pthread_mutex_lock(&loader_mutex);
		h = dlopen(lib_b, RTLD_NOW | RTLD_LOCAL);
		pthread_mutex_unlock(&loader_mutex);
		if (h == NULL || hz_gen_check(h) != 0) {
			fprintf(stderr, "second copy: %s\n", h ? "wrong results" : dlerror());
			other_bad++;
		}
		pthread_mutex_lock(&loader_mutex);
		if (h)
			dlclose(h);
		pthread_mutex_unlock(&loader_mutex);
		other_rounds++;
		nap_ms(1);
	}
	return NULL;
}

static void child(unsigned slot, void *handle)
{
	int rc;

	stress_child_step(slot, "run the inherited library");
	if (hz_gen_check(handle) != 0)
		_exit(40);
	stress_child_step(slot, "dlclose in the child");
	if (dlclose(handle) != 0)
		_exit(41);
	stress_child_step(slot, "dlopen in the child");
	handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL || hz_gen_check(handle) != 0)
		_exit(42);
	rc = stress_child_work(slot);
	_exit(rc);
}

static int fork_with_library(void *handle, unsigned round)
{
	unsigned slot = stress_child_slot();
	pid_t pid;

	stress_phase(CHILD_SECONDS + 20, "dlopen loop: child of round %u", round + 1);
	pthread_mutex_lock(&loader_mutex);
	pid = fork();
	pthread_mutex_unlock(&loader_mutex);
	if (pid < 0)
		return -1;
	if (pid == 0)
		child(slot, handle);
	stress_child_track(pid, slot);
	return stress_child_reap(pid, slot, CHILD_SECONDS, "dlopen loop");
}

/* 8 MiB, above any threshold hugezero takes: written so it is not
 * dropped. */
static void *large_allocation(void)
{
	volatile char *p = malloc(8u << 20);

	if (p != NULL)
		p[0] = 1;
	return (void *)p;
}

static void dlopen_dlclose_loop_keeps_text_working(void **state)
{
	unsigned rounds = (unsigned)stress_env("HZ_DLOPENS", 200), maps_early = 0, maps_end;
	unsigned bad = 0;
	const char *mode = getenv("HUGEZERO_EXEC") ? getenv("HUGEZERO_EXEC") : "(default)";
	struct text loaded = { 0 };
	pthread_t other;

	(void)state;
	fflush(NULL);
	stress_load_start(2, NULL, 0);
	assert_int_equal(pthread_create(&other, NULL, other_loader, NULL), 0);
	for (unsigned i = 0; i < rounds && bad < 5; i++) {
		void *h;
		int wrong;

		stress_phase(60, "dlopen loop: round %u of %u, HUGEZERO_EXEC=%s, %s", i + 1,
			     rounds, mode, i % 2 ? "cached" : "cold");
		if (i % 2 == 0 && hz_gen_drop(lib) < 0)
			fail_msg("cannot drop %s from the page cache", lib);
		/* The round whose text is inspected (i == 1) loads alone:
		 * hugezero moves text only for a dlopen no other thread's
		 * dlopen or dlclose overlapped (src/exec/dlopen.c), so with the
		 * second loader running it could move nothing by design. Every
		 * other round overlaps it. */
		if (i == 1)
			pthread_mutex_lock(&loader_mutex);
		h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		/* Under the preload the mode is applied to what a dlopen
		 * loaded at the thread's next large allocation
		 * (src/exec/dlopen.h): made before the second loader may
		 * dlopen again. */
		if (i == 1) {
			free(large_allocation());
			pthread_mutex_unlock(&loader_mutex);
		}
		if (h == NULL)
			fail_msg("dlopen %s: %s", lib, dlerror());
		wrong = hz_gen_check(h);
		if (wrong != 0) {
			fprintf(stderr, "round %u: %d functions gave wrong results\n", i + 1, wrong);
			bad++;
		}
		if (i == 1)
			text_flags(&loaded);
		if (i % 10 == 5 && fork_with_library(h, i) != 0)
			bad++;
		stress_phase(60, "dlopen loop: dlclose in round %u of %u", i + 1, rounds);
		assert_int_equal(dlclose(h), 0);
		/* Really unloaded: the next round maps it afresh. */
		h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (h != NULL)
			fail_msg("round %u: %s still loaded after dlclose", i + 1, lib);
		if (i == 4)
			maps_early = count_maps();
	}
	stress_phase(60, "dlopen loop: stopping the second loader");
	__atomic_store_n(&other_stop, 1, __ATOMIC_RELEASE);
	pthread_join(other, NULL);
	stress_phase(60, "dlopen loop: stopping the allocating threads");
	assert_int_equal(stress_load_stop(), 0);
	stress_phase_end();
	maps_end = count_maps();
	printf("HUGEZERO_EXEC=%s: %u rounds (%u of the second copy); %u of %u text mappings "
	       "advised, %u moved; %u mappings after round 5, %u at the end\n", mode, rounds,
	       other_rounds, loaded.advised, loaded.exec_maps, loaded.moved, maps_early,
	       maps_end);
	assert_int_equal(bad, 0);
	assert_int_equal(other_bad, 0);
	assert_true(other_rounds > 0);
	if (rounds > 5 && maps_end > maps_early + MAPS_SLACK)
		fail_msg("mappings grew from %u to %u over the loop", maps_early, maps_end);
	assert_true(loaded.exec_maps > 0);
	if (stress_preloaded() && strcmp(mode, "off") != 0 && loaded.advised == 0)
		fail_msg("the library's text was not advised: HUGEZERO_EXEC did nothing");
	if (!stress_preloaded() && loaded.advised != 0)
		fail_msg("text advised without the preload: the check is not honest");
	/* remap moves the aligned interior onto anonymous memory. */
	if (stress_preloaded() && strcmp(mode, "remap") == 0 && loaded.moved == 0)
		fail_msg("HUGEZERO_EXEC=remap moved no text of the library");
	if (!stress_preloaded() && loaded.moved != 0)
		fail_msg("text moved without the preload: the check is not honest");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(dlopen_dlclose_loop_keeps_text_working),
	};

	return stress_main(all, sizeof(all) / sizeof(all[0]), setup, teardown, argc, argv);
}
