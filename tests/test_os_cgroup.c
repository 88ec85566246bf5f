/* The cgroup readers of os.h on fixture trees (hz_os_set_root): the
 * process's cgroup is found from /proc/self/cgroup and mountinfo, v1 and
 * v2, with a mount that shows only part of the hierarchy (a container
 * without a cgroup namespace); limits bind from every ancestor; usage less
 * inactive page cache gives the room; hugetlb's fault and reservation
 * limits both count; and on this machine the real tree reads without
 * error. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#define HZ_OS_TESTING
#include "prim/os.h"

#define MiB ((uint64_t)1 << 20)

static char root[256];

/* Write text to root/path, making the directories on the way. */
static void put(const char *path, const char *text)
{
	char full[768];
	FILE *f;

	snprintf(full, sizeof(full), "%s/%s", root, path);
	for (char *slash = strchr(full + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(full, 0755);
		*slash = '/';
	}
	f = fopen(full, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int make_root(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/hz-test-cgroup-%d-XXXXXX", (int)getpid());
	assert_non_null(mkdtemp(root));
	hz_os_set_root(root);
	return 0;
}

static int remove_root(void **state)
{
	char cmd[320];

	(void)state;
	hz_os_set_root(NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* A hybrid host as a container sees it: v1 memory mounted at the
 * container's own cgroup (root /docker/c1), cgroup2 for the rest. */
static void v1_memory_limit_binds_from_the_mount_top(void **state)
{
	struct hz_os_cgroup cg;
	struct hz_os_memcg m;

	(void)state;
	put("proc/self/cgroup", "9:pids:/docker/c1\n4:memory:/docker/c1/app\n0::/docker/c1\n");
	put("proc/self/mountinfo",
	    "22 1 0:20 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
	    "30 22 0:25 /docker/c1 /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
	    "31 22 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "268435456\n");
	put("sys/fs/cgroup/memory/memory.usage_in_bytes", "209715200\n");
	put("sys/fs/cgroup/memory/memory.stat", "cache 0\ntotal_inactive_file 0\n");
	put("sys/fs/cgroup/memory/app/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/app/memory.usage_in_bytes", "104857600\n");
	assert_int_equal(hz_os_cgroup_find("memory", &cg), 0);
	assert_false(cg.v2);
	assert_true(strstr(cg.dir, "/sys/fs/cgroup/memory/app") != NULL);
	assert_int_equal(hz_os_memcg_read(&cg, &m), 0);
	assert_int_equal(m.limit, 256 * MiB);
	assert_int_equal(m.room, 56 * MiB);
	/* Inactive page cache counts as room: reclaim takes it first. */
	put("sys/fs/cgroup/memory/memory.stat",
	    "inactive_file 1\ntotal_inactive_file 20971520\ntotal_active_file 5\n");
	assert_int_equal(hz_os_memcg_read(&cg, &m), 0);
	assert_int_equal(m.room, 76 * MiB);
}

/* v2: memory.high below memory.max is the limit; the parent's max binds. */
static void v2_memory_high_and_parent_max_bind(void **state)
{
	struct hz_os_cgroup cg;
	struct hz_os_memcg m;

	(void)state;
	put("proc/self/cgroup", "0::/pod/ctr\n");
	put("proc/self/mountinfo",
	    "40 1 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
	put("sys/fs/cgroup/pod/ctr/memory.max", "max\n");
	put("sys/fs/cgroup/pod/ctr/memory.high", "314572800\n");
	put("sys/fs/cgroup/pod/ctr/memory.current", "104857600\n");
	put("sys/fs/cgroup/pod/ctr/memory.stat", "anon 1\ninactive_file 10485760\n");
	put("sys/fs/cgroup/pod/memory.max", "1073741824\n");
	put("sys/fs/cgroup/pod/memory.high", "max\n");
	put("sys/fs/cgroup/pod/memory.current", "1048576000\n");
	put("sys/fs/cgroup/pod/memory.stat", "inactive_file 0\n");
	assert_int_equal(hz_os_cgroup_find("memory", &cg), 0);
	assert_true(cg.v2);
	assert_int_equal(hz_os_memcg_read(&cg, &m), 0);
	assert_int_equal(m.limit, 300 * MiB);
	assert_int_equal(m.room, 24 * MiB); /* the pod's: 1024 - 1000 */
}

static void no_cgroup_mount_is_enoent_and_no_limit_is_unlimited(void **state)
{
	struct hz_os_cgroup cg;
	struct hz_os_memcg m;

	(void)state;
	put("proc/self/cgroup", "0::/\n");
	put("proc/self/mountinfo", "22 1 0:20 / / rw - ext4 /dev/vda rw\n");
	assert_int_equal(hz_os_cgroup_find("memory", &cg), -ENOENT);
	put("proc/self/mountinfo", "22 1 0:20 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	assert_int_equal(hz_os_cgroup_find("memory", &cg), 0);
	/* The root cgroup has no memory.max. */
	assert_int_equal(hz_os_memcg_read(&cg, &m), 0);
	assert_true(m.limit == HZ_OS_UNLIMITED && m.room == HZ_OS_UNLIMITED);
}

/* What Kubernetes sets for a pod that requests no hugepages. */
static void v2_hugetlb_max_0_leaves_no_room(void **state)
{
	struct hz_os_cgroup cg;
	uint64_t room = 1;

	(void)state;
	put("proc/self/cgroup", "0::/kubepods/pod1\n");
	put("proc/self/mountinfo", "40 1 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/kubepods/pod1/hugetlb.2MB.max", "0\n");
	put("sys/fs/cgroup/kubepods/pod1/hugetlb.2MB.current", "0\n");
	put("sys/fs/cgroup/kubepods/pod1/hugetlb.2MB.rsvd.max", "max\n");
	put("sys/fs/cgroup/kubepods/pod1/hugetlb.2MB.rsvd.current", "0\n");
	assert_int_equal(hz_os_cgroup_find("hugetlb", &cg), 0);
	assert_int_equal(hz_os_hugetlb_room(&cg, 2 * MiB, &room), 0);
	assert_int_equal(room, 0);
	/* No 1 GiB files at all: no limit on that size. */
	assert_int_equal(hz_os_hugetlb_room(&cg, 1024 * MiB, &room), 0);
	assert_true(room == HZ_OS_UNLIMITED);
}

/* v1: the reservation limit is the tighter one here. */
static void v1_hugetlb_reservation_limit_counts(void **state)
{
	struct hz_os_cgroup cg;
	uint64_t room = 0;

	(void)state;
	put("proc/self/cgroup", "7:hugetlb:/job\n");
	put("proc/self/mountinfo",
	    "33 22 0:28 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n");
	put("sys/fs/cgroup/hugetlb/job/hugetlb.2MB.limit_in_bytes", "16777216\n");
	put("sys/fs/cgroup/hugetlb/job/hugetlb.2MB.usage_in_bytes", "2097152\n");
	put("sys/fs/cgroup/hugetlb/job/hugetlb.2MB.rsvd.limit_in_bytes", "8388608\n");
	put("sys/fs/cgroup/hugetlb/job/hugetlb.2MB.rsvd.usage_in_bytes", "4194304\n");
	assert_int_equal(hz_os_cgroup_find("hugetlb", &cg), 0);
	assert_false(cg.v2);
	assert_int_equal(hz_os_hugetlb_room(&cg, 2 * MiB, &room), 0);
	assert_int_equal(room, 4 * MiB);
	/* A limit without its usage file: nothing is known to be allowed. */
	put("sys/fs/cgroup/hugetlb/job/hugetlb.1GB.limit_in_bytes", "1073741824\n");
	assert_int_not_equal(hz_os_hugetlb_room(&cg, 1024 * MiB, &room), 0);
	assert_int_equal(room, 0);
}

/* Long lines (an overlay mount's layers) are skipped, not misread. */
static void long_mountinfo_lines_are_skipped(void **state)
{
	static char text[12000];
	struct hz_os_cgroup cg;
	size_t n;

	(void)state;
	put("proc/self/cgroup", "0::/a\n");
	n = (size_t)snprintf(text, sizeof(text), "10 1 0:1 / / rw - overlay overlay rw,lowerdir=");
	while (n < 9000)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "/var/lib/layer%zu:", n);
	snprintf(text + n, sizeof(text) - n,
		 "\n40 1 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("proc/self/mountinfo", text);
	assert_int_equal(hz_os_cgroup_find("memory", &cg), 0);
	assert_true(strstr(cg.dir, "/sys/fs/cgroup/a") != NULL);
}

/* This machine's own tree: found (where mounted) and read. */
static void real_tree_reads(void **state)
{
	struct hz_os_cgroup cg;
	struct hz_os_memcg m;
	uint64_t room;

	(void)state;
	hz_os_set_root(NULL);
	if (hz_os_cgroup_find("memory", &cg) == 0)
		assert_int_equal(hz_os_memcg_read(&cg, &m), 0);
	if (hz_os_cgroup_find("hugetlb", &cg) == 0)
		assert_int_equal(hz_os_hugetlb_room(&cg, 2 * MiB, &room), 0);
	hz_os_set_root(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(v1_memory_limit_binds_from_the_mount_top, make_root,
						remove_root),
		cmocka_unit_test_setup_teardown(v2_memory_high_and_parent_max_bind, make_root,
						remove_root),
		cmocka_unit_test_setup_teardown(no_cgroup_mount_is_enoent_and_no_limit_is_unlimited,
						make_root, remove_root),
		cmocka_unit_test_setup_teardown(v2_hugetlb_max_0_leaves_no_room, make_root,
						remove_root),
		cmocka_unit_test_setup_teardown(v1_hugetlb_reservation_limit_counts, make_root,
						remove_root),
		cmocka_unit_test_setup_teardown(long_mountinfo_lines_are_skipped, make_root,
						remove_root),
		cmocka_unit_test_setup_teardown(real_tree_reads, make_root, remove_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
