/* dlopen by bare name with LD_LIBRARY_PATH=dir_a:dir_b, where dir_a holds
 * a build of the library for another architecture (or ELF class) and dir_b
 * the native one, as multi-arch setups have (Wine, Steam's runtime, vendor
 * SDKs). ld.so skips a file of the wrong machine or class and loads the
 * next one. The foreign file is a copy of the native library with its ELF
 * header's machine (or class) changed: exactly what ld.so checks.
 *
 * usage: dlsearch machine|class NATIVE_LIBRARY */
#include "hostile.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "libhostile_answer.so"

static void copy(const char *from, const char *dir, bool foreign, bool class)
{
	static char buf[1 << 20];
	char to[256];
	int in = open(from, O_RDONLY), out;
	ssize_t n;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;

	CHECK(in >= 0, "open %s: %s", from, strerror(errno));
	n = read(in, buf, sizeof(buf));
	CHECK(n > (ssize_t)sizeof(*eh) && n < (ssize_t)sizeof(buf), "read %s", from);
	close(in);
	if (foreign && class)
		eh->e_ident[EI_CLASS] = ELFCLASS32;
	else if (foreign)
		eh->e_machine = eh->e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
	snprintf(to, sizeof(to), "%s/" NAME, dir);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	CHECK(out >= 0 && write(out, buf, (size_t)n) == n && close(out) == 0, "write %s", to);
}

static int load(void)
{
	void *h = dlopen(NAME, RTLD_NOW);
	int (*answer)(void);

	CHECK(h != NULL, "dlopen(\"%s\"): %s", NAME, dlerror());
	answer = (int (*)(void))dlsym(h, "hostile_answer");
	CHECK(answer != NULL, "dlsym: %s", dlerror());
	printf("hostile_answer() = %d\n", answer());
	dlclose(h);
	return 0;
}

int main(int argc, char **argv)
{
	char top[] = "/tmp/hz-hostile-dl-XXXXXX", a[64], b[64], path[160];
	pid_t pid;
	int ret;

	if (argc == 2 && strcmp(argv[1], "inside") == 0)
		return load();
	CHECK(argc == 3 && (strcmp(argv[1], "machine") == 0 || strcmp(argv[1], "class") == 0),
	      "usage: %s machine|class NATIVE_LIBRARY", argv[0]);
	CHECK(mkdtemp(top) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(a, sizeof(a), "%s/a", top);
	snprintf(b, sizeof(b), "%s/b", top);
	CHECK(mkdir(a, 0755) == 0 && mkdir(b, 0755) == 0, "mkdir: %s", strerror(errno));
	copy(argv[2], a, true, strcmp(argv[1], "class") == 0);
	copy(argv[2], b, false, false);
	snprintf(path, sizeof(path), "%s:%s", a, b);
	/* ld.so reads LD_LIBRARY_PATH at start-up: the search runs in a new
	 * image. */
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		setenv("LD_LIBRARY_PATH", path, 1);
		execl("/proc/self/exe", argv[0], "inside", (char *)NULL);
		CHECK(0, "exec: %s", strerror(errno));
	}
	ret = hostile_wait(pid);
	snprintf(path, sizeof(path), "%s/" NAME, a);
	unlink(path);
	snprintf(path, sizeof(path), "%s/" NAME, b);
	unlink(path);
	rmdir(a);
	rmdir(b);
	rmdir(top);
	return ret;
}
