/* Freed blocks an allocator keeps must not hold memory the system wants
 * back. glibc gives a large block back at free; a cache that keeps it must
 * let the kernel take it when asked. Root only (both variants change the
 * system and put it back).
 *
 * Variants:
 *  - lower_limit: in a memory cgroup without a limit, the program uses and
 *    frees six 64 MiB blocks three times, rests 2 s (its blocks are kept
 *    for 5 s, HUGEZERO_CACHE_ADAPT=0), then lowers its own cgroup's limit
 *    to 192 MiB. glibc's program holds nothing then, and
 *    the write succeeds; memory cached and not reclaimable makes it fail
 *    (v1: EBUSY; v2: the OOM killer). Then the program works on below the
 *    new limit: a calloc'd block reads zero, two blocks are written.
 *  - strict_commit: vm.overcommit_memory 2 with CommitLimit 1 GiB above
 *    what the machine has committed; the program uses and frees six
 *    128 MiB blocks three times, then another process (the parent) maps a
 *    quarter of CommitLimit less 64 MiB (at least 276 MiB). glibc's
 *    program has given its commit charge back (1 GiB of room); a cache
 *    holding all 768 MiB leaves 256 MiB; hugezero keeps a quarter of the
 *    limit free. The machine's other processes must not commit more than
 *    about 64 MiB meanwhile (the kernel also keeps up to 128 MiB of the
 *    room from each process): the case is not run beside others. */
#include "cgroup.h"
#include "hostile.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 3
#define BLOCKS_MAX 6

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Use and free n blocks of len, ROUNDS times, pause_ms apart. */
static void use_and_free(int n, size_t len, unsigned pause_ms)
{
	char *b[BLOCKS_MAX];

	for (int round = 0; round < ROUNDS; round++) {
		if (round > 0)
			sleep_ms(pause_ms);
		for (int i = 0; i < n; i++) {
			b[i] = hostile_keep(malloc(len));
			CHECK(b[i] != NULL, "round %d: malloc(%zu MiB): %s", round, len / MiB,
			      strerror(errno));
			memset(b[i], round + i + 1, len);
		}
		for (int i = 0; i < n; i++)
			free(hostile_keep(b[i]));
	}
}

/* ---- lower_limit ---- */

static int lower_limit_inside(void)
{
	struct cgroup cg = { .v2 = getenv("RECLAIM_CGROUP_V2") != NULL };
	const char *dir = getenv("RECLAIM_CGROUP");
	const char *file = cg.v2 ? "memory.max" : "memory.limit_in_bytes";

	CHECK(dir != NULL, "RECLAIM_CGROUP not set");
	snprintf(cg.dir, sizeof(cg.dir), "%s", dir);
	use_and_free(6, 64 * MiB, 0);
	sleep_ms(2000);
	NOTE("resident before lowering: %lld MiB", hostile_status_bytes("VmRSS:") >> 20);
	CHECK(cgroup_set(&cg, file, "201326592") == 0, "lowering %s to 192 MiB: %s", file,
	      strerror(errno));
	NOTE("usage after lowering: %lld bytes",
	     hostile_read_ll(cg.v2 ? strcat(cg.dir, "/memory.current")
				   : strcat(cg.dir, "/memory.usage_in_bytes")));
	hostile_use_new_block(64 * MiB, true);
	hostile_use_new_block(64 * MiB, false);
	puts("limit lowered to 192 MiB; blocks work below it");
	return 0;
}

static int lower_limit(const char *self)
{
	struct cgroup cg;
	char why[256];
	int ret;

	if (cgroup_create("memory", &cg, why, sizeof(why)) != 0)
		SKIP("memory cgroup: %s", why);
	if (cg.v2)
		cgroup_set(&cg, "memory.swap.max", "0");
	setenv("RECLAIM_CGROUP", cg.dir, 1);
	/* The longest a freed block stays: HUGEZERO_DECAY_MS (5 s), which the
	 * adaptive stays shorten to 250 ms-1 s for most classes. */
	setenv("HUGEZERO_CACHE_ADAPT", "0", 1);
	if (cg.v2)
		setenv("RECLAIM_CGROUP_V2", "1", 1);
	ret = cgroup_run_inside_as(&cg, self, "lower_limit_inside");
	hostile_undo_all();
	return ret;
}

/* ---- strict_commit ---- */

/* A "Name:  N kB" line of /proc/meminfo, in bytes, or -1. */
static long long meminfo_bytes(const char *name)
{
	char line[256];
	long long kb = -1;
	size_t len = strlen(name);
	FILE *f = fopen("/proc/meminfo", "r");

	CHECK(f != NULL, "/proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, len) == 0 && line[len] == ':')
			kb = strtoll(line + len + 1, NULL, 10);
	fclose(f);
	return kb < 0 ? -1 : kb << 10;
}

/* Write text into path (NULL: nothing), and its value now back at exit. */
static void set_sysctl(const char *path, const char *text)
{
	char old[64];
	FILE *f = fopen(path, "r");

	CHECK(f != NULL && fgets(old, sizeof(old), f) != NULL, "%s: %s", path, strerror(errno));
	fclose(f);
	old[strcspn(old, "\n")] = '\0';
	hostile_undo_write(path, old);
	if (text)
		CHECK(hostile_write(path, text) == 0, "%s <- %s: %s", path, text,
		      strerror(errno));
}

static int strict_commit(void)
{
	int ready[2], go[2], status;
	long long committed = meminfo_bytes("Committed_AS"), swap = meminfo_bytes("SwapTotal");
	char text[32], c;
	long long want;
	pid_t pid;
	void *p;

	if (getuid() != 0)
		SKIP("vm.overcommit_memory needs root");
	CHECK(committed > 0 && swap >= 0, "Committed_AS or SwapTotal missing from /proc/meminfo");
	CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe: %s", strerror(errno));
	/* CommitLimit = overcommit_kbytes + swap. Writing the kbytes sets the
	 * ratio to 0, and restoring them does not set it back: the ratio is
	 * restored last (undo runs in reverse). */
	set_sysctl("/proc/sys/vm/overcommit_ratio", NULL);
	snprintf(text, sizeof(text), "%lld", (committed + (1ll << 30) - swap) >> 10);
	set_sysctl("/proc/sys/vm/overcommit_kbytes", text);
	set_sysctl("/proc/sys/vm/overcommit_memory", "2");
	/* A quarter of the limit, less 64 MiB the machine may commit
	 * meanwhile: at least 276 MiB (a limit of 1 GiB above almost
	 * nothing), more than the 256 MiB a cache of 768 leaves. */
	want = (meminfo_bytes("CommitLimit") / 4 - 64 * (long long)MiB) & ~((long long)MiB - 1);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		use_and_free(6, 128 * MiB, 0);
		sleep_ms(500);
		CHECK(write(ready[1], "r", 1) == 1, "write: %s", strerror(errno));
		CHECK(read(go[0], &c, 1) == 1, "read: %s", strerror(errno));
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	CHECK(read(ready[0], &c, 1) == 1, "the program ended early");
	NOTE("commit room: %lld MiB",
	     (meminfo_bytes("CommitLimit") - meminfo_bytes("Committed_AS")) >> 20);
	p = mmap(NULL, (size_t)want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(write(go[1], "g", 1) == 1, "write: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the program failed");
	hostile_undo_all();
	CHECK(p != MAP_FAILED, "another process could not map %lld MiB: %s", want >> 20,
	      strerror(errno));
	puts("another process mapped a quarter of the commit limit less 64 MiB");
	return 0;
}

int main(int argc, char **argv)
{
	char self[4096];
	ssize_t n;

	if (argc == 2 && strcmp(argv[1], "lower_limit_inside") == 0)
		return lower_limit_inside();
	if (argc == 2 && strcmp(argv[1], "strict_commit") == 0)
		return strict_commit();
	CHECK(argc == 2 && strcmp(argv[1], "lower_limit") == 0,
	      "usage: %s lower_limit|strict_commit", argv[0]);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0, "/proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	return lower_limit(self);
}
