/* dlopen answers for its caller: glibc takes the calling object from the
 * return address and resolves $ORIGIN, DT_RUNPATH and the namespace
 * against it. Each variant loads something only the caller's own context
 * can find, so a wrapper whose call makes itself the caller finds another
 * file, or none.
 *
 * usage: dlcaller VARIANT ANSWER_LIBRARY PLUGIN_LIBRARY
 *   origin      dlopen("$ORIGIN/libhostile_answer.so") from the program,
 *               which sits next to that library in the build tree
 *   plugin_ctor a plug-in whose constructor dlopens a library by bare name
 *               through its own RUNPATH ($ORIGIN/lib)
 *   system_dir  the program copied under /usr/lib/hz-test-XXXXXX with its
 *               library in lib/ beside it, found through its RUNPATH
 *               ($ORIGIN/lib): any directory under /usr/lib is the
 *               package's own (root; skipped otherwise)
 *   noload      a library loaded by path, then asked for with RTLD_NOLOAD
 *               by its file name, which only the program's RUNPATH finds
 *               (ld.so matches the file it finds with the loaded one) */
#include "hostile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int answer_of(void *h, const char *what)
{
	int (*answer)(void);

	CHECK(h != NULL, "dlopen(%s): %s", what, dlerror());
	answer = (int (*)(void))dlsym(h, "hostile_answer");
	CHECK(answer != NULL, "dlsym: %s", dlerror());
	return answer();
}

static void copy(const char *from, const char *to)
{
	static char buf[4 << 20];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	CHECK(in >= 0, "open %s: %s", from, strerror(errno));
	n = read(in, buf, sizeof(buf));
	CHECK(n > 0 && n < (ssize_t)sizeof(buf), "read %s", from);
	close(in);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	CHECK(out >= 0 && write(out, buf, (size_t)n) == n && close(out) == 0, "write %s: %s", to,
	      strerror(errno));
}

/* dir/NAME: the program itself, and the answer library as dir/lib/LIB. */
static void install(const char *dir, const char *answer, const char *lib)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/lib", dir);
	CHECK(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
	hostile_undo_rmdir(path);
	snprintf(path, sizeof(path), "%s/lib/%s", dir, lib);
	copy(answer, path);
	snprintf(path, sizeof(path), "%s/hostile_dlcaller", dir);
	copy("/proc/self/exe", path);
}

static void uninstall(const char *dir, const char *lib)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/lib/%s", dir, lib);
	unlink(path);
	snprintf(path, sizeof(path), "%s/hostile_dlcaller", dir);
	unlink(path);
}

/* Run dir's copy of the program with VARIANT ARG in a new image. */
static int run_copy(const char *dir, const char *variant, const char *arg)
{
	char path[512];
	pid_t pid;

	snprintf(path, sizeof(path), "%s/hostile_dlcaller", dir);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		execl(path, path, variant, arg, (char *)NULL);
		CHECK(0, "exec %s: %s", path, strerror(errno));
	}
	return hostile_wait(pid);
}

static int origin(void)
{
	printf("hostile_answer() = %d\n",
	       answer_of(dlopen("$ORIGIN/libhostile_answer.so", RTLD_NOW), "$ORIGIN/..."));
	return 0;
}

static int plugin_ctor(const char *answer, const char *plugin)
{
	char top[] = "/tmp/hz-hostile-plugin-XXXXXX", path[512];
	int *result;
	void *h;

	CHECK(mkdtemp(top) != NULL, "mkdtemp: %s", strerror(errno));
	hostile_undo_rmdir(top);
	snprintf(path, sizeof(path), "%s/lib", top);
	CHECK(mkdir(path, 0755) == 0, "mkdir: %s", strerror(errno));
	hostile_undo_rmdir(path);
	snprintf(path, sizeof(path), "%s/lib/libhostile_answer.so", top);
	copy(answer, path);
	snprintf(path, sizeof(path), "%s/libhostile_plugin.so", top);
	copy(plugin, path);
	h = dlopen(path, RTLD_NOW);
	CHECK(h != NULL, "dlopen(%s): %s", path, dlerror());
	result = dlsym(h, "hostile_plugin_result");
	CHECK(result != NULL, "dlsym: %s", dlerror());
	printf("the plug-in's constructor got %d\n", *result);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lib/libhostile_answer.so", top);
	unlink(path);
	return 0;
}

static int system_dir(const char *answer)
{
	char top[] = "/usr/lib/hz-test-XXXXXX";
	int ret;

	if (geteuid() != 0)
		SKIP("needs root to write under /usr/lib");
	CHECK(mkdtemp(top) != NULL, "mkdtemp %s: %s", top, strerror(errno));
	hostile_undo_rmdir(top);
	install(top, answer, "libhostile_answer.so");
	ret = run_copy(top, "inside_bare", "libhostile_answer.so");
	uninstall(top, "libhostile_answer.so");
	return ret;
}

static int noload(const char *answer)
{
	char top[] = "/tmp/hz-hostile-noload-XXXXXX";
	int ret;

	CHECK(mkdtemp(top) != NULL, "mkdtemp: %s", strerror(errno));
	hostile_undo_rmdir(top);
	install(top, answer, "libhostile_other.so");
	ret = run_copy(top, "inside_noload", "libhostile_other.so");
	uninstall(top, "libhostile_other.so");
	return ret;
}

/* In the copy: the library by bare name, through the RUNPATH. */
static int inside_bare(const char *name)
{
	printf("hostile_answer() = %d\n", answer_of(dlopen(name, RTLD_NOW), name));
	return 0;
}

/* In the copy: loaded by path (its soname is libhostile_answer.so), then
 * asked for by file name with RTLD_NOLOAD. */
static int inside_noload(const char *name)
{
	char path[512], exe[400];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h, *again;

	CHECK(n > 0, "readlink: %s", strerror(errno));
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/lib/%s", exe, name);
	h = dlopen(path, RTLD_NOW);
	CHECK(h != NULL, "dlopen(%s): %s", path, dlerror());
	again = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
	printf("RTLD_NOLOAD of the loaded %s: %s\n", name,
	       again == NULL ? "NULL" : again == h ? "its handle" : "another handle");
	CHECK(dlopen("libhostile_absent.so", RTLD_NOW | RTLD_NOLOAD) == NULL,
	      "RTLD_NOLOAD loaded a library that does not exist");
	printf("RTLD_NOLOAD of a library not loaded: NULL\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "inside_bare") == 0)
		return inside_bare(argv[2]);
	if (argc == 3 && strcmp(argv[1], "inside_noload") == 0)
		return inside_noload(argv[2]);
	CHECK(argc == 4, "usage: %s VARIANT ANSWER_LIBRARY PLUGIN_LIBRARY", argv[0]);
	if (strcmp(argv[1], "origin") == 0)
		return origin();
	if (strcmp(argv[1], "plugin_ctor") == 0)
		return plugin_ctor(argv[2], argv[3]);
	if (strcmp(argv[1], "system_dir") == 0)
		return system_dir(argv[2]);
	if (strcmp(argv[1], "noload") == 0)
		return noload(argv[2]);
	CHECK(0, "no variant named %s", argv[1]);
	return 2;
}
