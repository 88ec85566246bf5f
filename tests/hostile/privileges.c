/* A single-threaded program gives up privileges by calls that change only
 * the calling thread (Linux keeps credentials, capabilities,
 * no_new_privs, seccomp filters and Landlock domains per thread; only
 * glibc's setuid family changes them all). Afterwards no thread of the
 * process may hold more than the main thread: every task's Uid, Gid,
 * CapEff, CapPrm, CapBnd, NoNewPrivs, Seccomp and Seccomp_filters is
 * compared with the main thread's, and no task that ran before the drop
 * may still run (its Landlock domain cannot be read from outside). The
 * program freed written large blocks of a reused size before and after
 * the drop: under the preload that started a pre-zero thread, which kept
 * uid 0 and every capability after a raw setuid to nobody. */
#include "hostile.h"

#include <dirent.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64 * MiB)
#define MAX_TASKS 64

/* glibc exports capset and declares it nowhere. */
int capset(void *header, void *data);

static int list_tasks(int *tids)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL, "/proc/self/task: %s", strerror(errno));
	while ((e = readdir(d)) != NULL && n < MAX_TASKS)
		if (e->d_name[0] != '.')
			tids[n++] = atoi(e->d_name);
	closedir(d);
	return n;
}

/* The value of status line key ("CapEff:") of task tid, as text. */
static void status_line(int tid, const char *key, char *out, size_t size)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	out[0] = '\0';
	f = fopen(path, "r");
	if (f == NULL)
		return; /* exited meanwhile */
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, strlen(key)) == 0) {
			snprintf(out, size, "%s", line + strlen(key) + strspn(line + strlen(key), " \t"));
			out[strcspn(out, "\n")] = '\0';
			break;
		}
	fclose(f);
}

static unsigned long long status_number(int tid, const char *key, int base)
{
	char v[128];

	status_line(tid, key, v, sizeof(v));
	return strtoull(v, NULL, base);
}

/* Task tid holds no more than the main thread. */
static void check_task(int tid, int main_tid)
{
	static const char *same[] = { "Uid:", "Gid:", "Groups:" };
	static const char *subset[] = { "CapEff:", "CapPrm:", "CapBnd:", "CapInh:", "CapAmb:" };
	static const char *at_least[] = { "NoNewPrivs:", "Seccomp:", "Seccomp_filters:" };
	char a[128], b[128];

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		status_line(tid, same[i], a, sizeof(a));
		status_line(main_tid, same[i], b, sizeof(b));
		CHECK(a[0] == '\0' || strcmp(a, b) == 0, "thread %d has %s %s, the main thread %s",
		      tid, same[i], a, b);
	}
	for (size_t i = 0; i < sizeof(subset) / sizeof(subset[0]); i++) {
		unsigned long long t = status_number(tid, subset[i], 16);
		unsigned long long m = status_number(main_tid, subset[i], 16);

		CHECK((t & ~m) == 0, "thread %d has %s %llx, more than the main thread's %llx", tid,
		      subset[i], t, m);
	}
	for (size_t i = 0; i < sizeof(at_least) / sizeof(at_least[0]); i++) {
		status_line(tid, at_least[i], a, sizeof(a));
		if (a[0] == '\0')
			continue; /* exited meanwhile, or a kernel without the line */
		CHECK(strtoull(a, NULL, 10) >= status_number(main_tid, at_least[i], 10),
		      "thread %d has %s %s, less than the main thread", tid, at_least[i], a);
	}
}

static void check_every_task(const int *before, int n_before)
{
	int tids[MAX_TASKS], n = list_tasks(tids), self = getpid();

	int others = 0;

	for (int i = 0; i < n; i++) {
		if (tids[i] == self)
			continue;
		check_task(tids[i], self);
		for (int j = 0; j < n_before; j++)
			CHECK(tids[i] != before[j], "thread %d ran before the drop and still runs",
			      tids[i]);
		others++;
	}
	NOTE("%d other threads checked", others);
}

/* ---- the drops ---- */

static void raw_setuid(void)
{
	CHECK(syscall(SYS_setgroups, 0, NULL) == 0, "setgroups: %s", strerror(errno));
	CHECK(syscall(SYS_setresgid, 65534, 65534, 65534) == 0, "setresgid: %s", strerror(errno));
	CHECK(syscall(SYS_setresuid, 65534, 65534, 65534) == 0, "setresuid: %s", strerror(errno));
}

static void no_capabilities(bool raw)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { { 0, 0, 0 }, { 0, 0, 0 } };
	int r = raw ? (int)syscall(SYS_capset, &hdr, data) : capset(&hdr, data);

	CHECK(r == 0, "capset: %s", strerror(errno));
}

static void no_new_privs(void)
{
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS: %s",
	      strerror(errno));
}

static void bounding_set(void)
{
	CHECK(prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) == 0, "PR_CAPBSET_DROP: %s",
	      strerror(errno));
}

/* A filter that allows everything: what counts is that one is there. */
static void seccomp_filter(bool raw)
{
	static struct sock_filter allow_all[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, allow_all };
	long r = raw ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
		     : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);

	CHECK(r == 0, "seccomp filter: %s", strerror(errno));
}

/* A domain that forbids making directories, which nothing here does. */
static void landlock(void)
{
	unsigned long long make_dir = 1ull << 7;
	long abi = syscall(444, NULL, 0, 1u), fd;

	if (abi < 1)
		SKIP("Landlock is not enabled in this kernel: %s", strerror(errno));
	no_new_privs();
	fd = syscall(444, &make_dir, sizeof(make_dir), 0);
	CHECK(fd >= 0, "landlock_create_ruleset: %s", strerror(errno));
	CHECK(syscall(446, fd, 0) == 0, "landlock_restrict_self: %s", strerror(errno));
	close((int)fd);
}

static int run(void (*drop)(void))
{
	int before[MAX_TASKS], n;

	if (geteuid() != 0)
		SKIP("dropping privileges needs root");
	hostile_recycle(BLOCK, 6, 100);
	n = list_tasks(before);
	drop();
	hostile_recycle(BLOCK, 6, 100);
	check_every_task(before, n);
	hostile_use_new_block(BLOCK, true);
	printf("no thread holds more than the main thread\n");
	return 0;
}

static void capset_libc(void) { no_capabilities(false); }
static void capset_raw(void) { no_capabilities(true); }
static void seccomp_prctl(void) { seccomp_filter(false); }
static void seccomp_raw(void) { seccomp_filter(true); }

static int v_raw_setuid(void) { return run(raw_setuid); }
static int v_capset(void) { return run(capset_libc); }
static int v_capset_raw(void) { return run(capset_raw); }
static int v_no_new_privs(void) { return run(no_new_privs); }
static int v_bounding_set(void) { return run(bounding_set); }
static int v_seccomp(void) { return run(seccomp_prctl); }
static int v_seccomp_raw(void) { return run(seccomp_raw); }
static int v_landlock(void) { return run(landlock); }

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "raw_setuid", v_raw_setuid },
		{ "capset", v_capset },
		{ "capset_raw", v_capset_raw },
		{ "no_new_privs", v_no_new_privs },
		{ "bounding_set", v_bounding_set },
		{ "seccomp", v_seccomp },
		{ "seccomp_raw", v_seccomp_raw },
		{ "landlock", v_landlock },
		{ NULL, NULL },
	};
	return hostile_main(argc, argv, variants);
}
