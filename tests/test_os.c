/* hz_os(): every fact agrees with what this test reads from /proc and /sys
 * itself (by its own parsing, not the library's), the pool reader gives
 * free_hugepages - resv_hugepages, the first fill keeps errno and gives
 * racing threads one struct, and the path helpers open what they name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#define HZ_OS_TESTING
#include "prim/os.h"
#include "prim/prim.h"

#define THP "/sys/kernel/mm/transparent_hugepage"

/* The file's first line, or false when it cannot be read. */
static bool read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (f == NULL)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	return ok;
}

static bool read_number(const char *path, uint64_t *out)
{
	char buf[64];

	if (!read_text(path, buf, sizeof(buf)))
		return false;
	*out = strtoull(buf, NULL, 10);
	return true;
}

/* The bracketed choice of a sysfs selector ("always [madvise] never"). */
static bool selected(const char *path, char *choice, size_t size)
{
	char buf[256], *open, *close;

	if (!read_text(path, buf, sizeof(buf)) || (open = strchr(buf, '[')) == NULL ||
	    (close = strchr(open, ']')) == NULL || (size_t)(close - open) > size)
		return false;
	memcpy(choice, open + 1, (size_t)(close - open - 1));
	choice[close - open - 1] = '\0';
	return true;
}

static void page_size_is_the_kernels(void **state)
{
	const struct hz_os *os = hz_os();

	(void)state;
	assert_int_equal(os->page_size, (size_t)sysconf(_SC_PAGESIZE));
	if (os->page_size == 4096)
		assert_int_equal(os->pmd_size, (size_t)2 << 20);
	assert_true(hz_os() == os);
}

/* The THP settings as this test reads them: the mode from "enabled", and
 * the sizes from each hugepages-<N>kB directory with an "enabled" file. */
static void expected_thp(size_t pmd_size, struct hz_os_thp *t)
{
	bool pmd_listed = false, on;
	char choice[32];
	struct dirent *e;
	DIR *d;

	memset(t, 0, sizeof(*t));
	if (selected(THP "/enabled", choice, sizeof(choice)))
		t->mode = strcmp(choice, "always") == 0  ? HZ_THP_ALWAYS
			  : strcmp(choice, "never") == 0 ? HZ_THP_NEVER
							 : HZ_THP_MADVISE;
	on = hz_os_thp_on(t->mode);
	d = opendir(THP);
	while (d != NULL && (e = readdir(d)) != NULL) {
		unsigned long kib;
		char path[300];

		if (sscanf(e->d_name, "hugepages-%lukB", &kib) != 1)
			continue;
		snprintf(path, sizeof(path), THP "/%s/enabled", e->d_name);
		if (!selected(path, choice, sizeof(choice)))
			continue; /* no anonymous control for this size (8 KiB) */
		t->per_size = true;
		pmd_listed |= (size_t)kib << 10 == pmd_size;
		if (strcmp(choice, "always") == 0 || strcmp(choice, "madvise") == 0 ||
		    (strcmp(choice, "inherit") == 0 && on))
			t->sizes |= (uint64_t)kib << 10;
	}
	if (d != NULL)
		closedir(d);
	if (!pmd_listed && on)
		t->sizes |= pmd_size;
}

static bool same_thp(const struct hz_os_thp *a, const struct hz_os_thp *b)
{
	return a->mode == b->mode && a->sizes == b->sizes && a->per_size == b->per_size;
}

/* Another build's exec_text may switch 64 KiB mTHP between the library's
 * read and this test's: a differing round is tried again after a reload,
 * and must settle. */
static void thp_settings_match_sysfs(void **state)
{
	struct hz_os_thp want, again;
	const struct hz_os *os = hz_os();

	(void)state;
	for (int round = 0; round < 5; round++) {
		expected_thp(os->pmd_size, &want);
		if (same_thp(&os->thp, &want))
			break;
		expected_thp(os->pmd_size, &again);
		if (same_thp(&want, &again))
			break; /* sysfs is stable: a real difference, reported below */
		hz_os_reload();
		os = hz_os();
	}
	print_message("THP mode %d, sizes %#llx (OR of the sizes), per-size controls %s\n",
		      (int)want.mode, (unsigned long long)want.sizes,
		      want.per_size ? "yes" : "no");
	assert_int_equal(os->thp.mode, want.mode);
	assert_int_equal(os->thp.per_size, want.per_size);
	assert_int_equal(os->thp.sizes, want.sizes);
	for (size_t bytes = 4096; bytes <= os->pmd_size; bytes *= 2)
		assert_int_equal(hz_os_thp_size_on(&os->thp, bytes), (want.sizes & bytes) != 0);
}

static void thp_read_now_matches_sysfs(void **state)
{
	struct hz_os_thp now, want;

	(void)state;
	for (int round = 0; round < 5; round++) {
		expected_thp(hz_os()->pmd_size, &want);
		hz_os_read_thp(&now);
		if (same_thp(&now, &want))
			return;
	}
	assert_int_equal(now.mode, want.mode);
	assert_int_equal(now.sizes, want.sizes);
	assert_int_equal(now.per_size, want.per_size);
}

static void pools_present_as_in_sysfs(void **state)
{
	static const char *const dirs[HZ_OS_POOLS] = {
		[HZ_OS_POOL_1G] = "/sys/kernel/mm/hugepages/hugepages-1048576kB",
		[HZ_OS_POOL_2M] = "/sys/kernel/mm/hugepages/hugepages-2048kB",
	};
	const struct hz_os *os = hz_os();

	(void)state;
	for (unsigned i = 0; i < HZ_OS_POOLS; i++) {
		char path[128];
		uint64_t nr;

		snprintf(path, sizeof(path), "%s/nr_hugepages", dirs[i]);
		assert_string_equal(os->pools[i].dir, dirs[i]);
		assert_int_equal(os->pools[i].present, read_number(path, &nr));
	}
	assert_int_equal(os->pools[HZ_OS_POOL_1G].page_size, (size_t)1 << 30);
	assert_int_equal(os->pools[HZ_OS_POOL_2M].page_size, (size_t)2 << 20);
}

static void read_pool(const char *dir, uint64_t *free_pages, uint64_t *reserved)
{
	char path[128];

	*free_pages = *reserved = 0;
	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	read_number(path, free_pages);
	snprintf(path, sizeof(path), "%s/resv_hugepages", dir);
	read_number(path, reserved);
}

/* hz_os_pool_available against free_hugepages - resv_hugepages read
 * around the call; other processes may change the pool meanwhile, so retry
 * until both reads agree. Returns the count. */
static uint64_t check_pool_reader(enum hz_os_pool pool)
{
	const struct hz_os_pool_info *p = &hz_os()->pools[pool];

	for (int attempt = 0; attempt < 20; attempt++) {
		uint64_t f1, r1, f2, r2, got;

		read_pool(p->dir, &f1, &r1);
		got = hz_os_pool_available(pool);
		read_pool(p->dir, &f2, &r2);
		if (f1 != f2 || r1 != r2)
			continue;
		print_message("%s: %llu free, %llu reserved: %llu available\n", p->dir,
			      (unsigned long long)f1, (unsigned long long)r1,
			      (unsigned long long)got);
		assert_int_equal(got, p->present && f1 > r1 ? f1 - r1 : 0);
		return got;
	}
	fail_msg("%s changed on every one of 20 reads", p->dir);
	return 0;
}

static void pool_reader_is_free_minus_reserved(void **state)
{
	(void)state;
	for (unsigned i = 0; i < HZ_OS_POOLS; i++)
		check_pool_reader((enum hz_os_pool)i);
	assert_int_equal(hz_os_pool_available(HZ_OS_POOLS), 0);
}

static void llc_size_matches_sysfs(void **state)
{
	uint64_t want = 0;

	(void)state;
	for (int index = 3; index >= 2 && want == 0; index--) {
		char path[80], buf[32], *end;

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size",
			 index);
		if (!read_text(path, buf, sizeof(buf)))
			continue;
		want = strtoull(buf, &end, 10);
		want <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 0;
	}
	assert_int_equal(hz_os()->llc_size, want);
	assert_int_equal(hz_prim_llc_size(), want);
}

static void kernel_version_matches_uname(void **state)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	(void)state;
	assert_int_equal(uname(&u), 0);
	assert_int_equal(sscanf(u.release, "%u.%u", &major, &minor), 2);
	assert_int_equal(hz_os()->kernel_major, major);
	assert_int_equal(hz_os()->kernel_minor, minor);
}

static void reload_fills_an_equal_struct(void **state)
{
	const struct hz_os *before = hz_os();
	struct hz_os copy = *before;

	(void)state;
	hz_os_reload();
	assert_true(hz_os() != before);
	assert_int_equal(hz_os()->page_size, copy.page_size);
	assert_int_equal(hz_os()->thp.sizes, copy.thp.sizes);
	assert_int_equal(hz_os()->llc_size, copy.llc_size);
	assert_int_equal(hz_os()->pools[HZ_OS_POOL_2M].present,
			 copy.pools[HZ_OS_POOL_2M].present);
}

/* ---- the first fill, in a fresh child ---- */

static const struct hz_os *seen[8];
static int go;

static void *first_caller(void *arg)
{
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		;
	seen[(intptr_t)arg] = hz_os();
	return NULL;
}

static int race_child(void)
{
	pthread_t t[8];
	unsigned before = 0, threads = 0;

	/* Read before any hz_os() call: it must not need the struct. At
	 * least eight more after: ThreadSanitizer may start one of its own. */
	if (hz_prim_thread_count(&before) != 0)
		return 2;
	for (intptr_t i = 0; i < 8; i++)
		if (pthread_create(&t[i], NULL, first_caller, (void *)i) != 0)
			return 1;
	if (hz_prim_thread_count(&threads) != 0 || threads < before + 8)
		return 2;
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 8; i++)
		if (seen[i] == NULL || seen[i] != hz_os())
			return 3;
	return 0;
}

static int errno_child(void)
{
	errno = EDOM;
	return hz_os() != NULL && errno == EDOM ? 0 : 1;
}

/* Run fn in a fork child, where nothing has filled the struct yet (these
 * run first, and the parent fills nothing before). */
static void in_child(int (*fn)(void))
{
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Eight threads call hz_os() first at once: one struct for all; and
 * hz_prim_thread_count counts them. */
static void first_fill_races_to_one_struct(void **state)
{
	(void)state;
	in_child(race_child);
}

static void first_fill_keeps_errno(void **state)
{
	(void)state;
	in_child(errno_child);
}

/* ---- paths ---- */

/* The path is opened and fstat'ed, not stat'ed: qemu-user emulates
 * opening /proc/self/exe (the guest program) but stat() of it reaches the
 * host's link (qemu itself). */
static bool same_file(int fd, const char *path)
{
	struct stat a, b;
	int other = open(path, O_RDONLY | O_CLOEXEC);
	bool same = other >= 0 && fstat(fd, &a) == 0 && fstat(other, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino;

	if (other >= 0)
		close(other);
	return same;
}

/* For /proc/PID/maps, which qemu-user emulates with a new temporary file
 * at each open (no inode to compare): the first lines agree. */
static bool same_first_line(int fd, const char *path)
{
	char a[256] = "", b[256] = "";
	FILE *f = fopen(path, "r");
	ssize_t n = read(fd, a, sizeof(a) - 1);
	bool same;

	if (!f)
		return false;
	same = n > 0 && fgets(b, sizeof(b), f) != NULL && strchr(a, '\n') &&
	       strncmp(a, b, (size_t)(strchr(a, '\n') - a)) == 0;
	fclose(f);
	return same;
}

static void path_helpers_open_what_they_name(void **state)
{
	char path[64];
	int fd;

	(void)state;
	fd = hz_prim_open_read(hz_prim_self_exe_path());
	assert_true(fd >= 0);
	assert_true(same_file(fd, "/proc/self/exe"));
	close(fd);
	fd = hz_prim_open_maps(0, true);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)getpid());
	fd = hz_prim_open_maps(getpid(), false);
	assert_true(fd >= 0 && same_first_line(fd, path));
	close(fd);
	fd = hz_prim_open_pagemap(0);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	fd = hz_prim_open_perfmap();
	assert_true(fd >= 0);
	assert_true(same_file(fd, path));
	close(fd);
	unlink(path);
}

/* ---- with a real pool (root; the os_hugetlb test, run alone) ---- */

#define NR_PATH "/proc/sys/vm/nr_hugepages"
#define POOL_PAGES 4
#define HUGE ((size_t)2 << 20)

/* One mapping of two pages: 0 when the pool moved exactly as that
 * mapping predicts, 3 when something else changed it meanwhile. Every read
 * is checked against sysfs (check_pool_reader) either way. */
static int reserve_and_touch(void)
{
	uint64_t before, reserved, touched;
	char *p;

	before = check_pool_reader(HZ_OS_POOL_2M);
	if (before < 2)
		return 77; /* fragmented: the kernel found no pages */
	/* Mapping reserves two pages; touching one takes it from the free
	 * count and from the reservation at once. */
	p = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	reserved = check_pool_reader(HZ_OS_POOL_2M);
	p[0] = 1;
	touched = check_pool_reader(HZ_OS_POOL_2M);
	munmap(p, 2 * HUGE);
	print_message("available: %llu before, %llu reserved, %llu touched\n",
		      (unsigned long long)before, (unsigned long long)reserved,
		      (unsigned long long)touched);
	return reserved == before - 2 && touched == reserved ? 0 : 3;
}

/* Other processes (tests of other builds) may use the pool at the same
 * time: a round they disturbed is tried again. */
static int reservation_child(void)
{
	int ret = 3;

	for (int round = 0; round < 5 && ret == 3; round++)
		ret = reserve_and_touch();
	return ret;
}

static void pool_reader_counts_a_reservation(void **state)
{
	uint64_t saved = 0;
	char value[32];
	int status, fd;
	pid_t pid;

	(void)state;
	if (geteuid() != 0 || !hz_os()->pools[HZ_OS_POOL_2M].present ||
	    !read_number(NR_PATH, &saved)) {
		print_message("[  SKIP    ] needs root and a 2 MiB hugetlb pool to raise\n");
		skip();
	}
	fd = open(NR_PATH, O_WRONLY);
	assert_true(fd >= 0);
	snprintf(value, sizeof(value), "%llu\n", (unsigned long long)saved + POOL_PAGES);
	assert_true(write(fd, value, strlen(value)) > 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(reservation_child());
	/* Put the pool back before any assertion can end the test. */
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = -1;
	snprintf(value, sizeof(value), "%llu\n", (unsigned long long)saved);
	assert_true(pwrite(fd, value, strlen(value), 0) > 0);
	close(fd);
	assert_true(status != -1 && WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		print_message("[  SKIP    ] the kernel could not raise the pool\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest pool_tests[] = {
		cmocka_unit_test(pool_reader_counts_a_reservation),
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_fill_races_to_one_struct),
		cmocka_unit_test(first_fill_keeps_errno),
		cmocka_unit_test(page_size_is_the_kernels),
		cmocka_unit_test(thp_settings_match_sysfs),
		cmocka_unit_test(thp_read_now_matches_sysfs),
		cmocka_unit_test(pools_present_as_in_sysfs),
		cmocka_unit_test(pool_reader_is_free_minus_reserved),
		cmocka_unit_test(llc_size_matches_sysfs),
		cmocka_unit_test(kernel_version_matches_uname),
		cmocka_unit_test(reload_fills_an_equal_struct),
		cmocka_unit_test(path_helpers_open_what_they_name),
	};

	if (argc > 1 && strcmp(argv[1], "hugetlb") == 0)
		return cmocka_run_group_tests(pool_tests, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
