/* A constructor that calls dlopen while the loader lock is held by a load
 * that did not go through the program's dlopen symbol (here dlmopen; also
 * the C library's own loads: NSS modules, iconv), and meanwhile another
 * thread calls dlopen. glibc's loader lock is recursive, so the
 * constructor's dlopen proceeds and the other thread waits its turn; a
 * lock of our own taken before the loader's would deadlock the two.
 *
 * usage: dlctor CTOR_LIBRARY ANSWER_LIBRARY */
#include "hostile.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

static const char *ctor_library;

static void *load_with_dlmopen(void *arg)
{
	(void)arg;
	return dlmopen(LM_ID_BASE, ctor_library, RTLD_NOW);
}

int main(int argc, char **argv)
{
	int pipefd[2], *result;
	char fd_text[16], c;
	pthread_t t;
	void *h, *m;

	CHECK(argc == 3, "usage: %s CTOR_LIBRARY ANSWER_LIBRARY", argv[0]);
	ctor_library = argv[1];
	CHECK(pipe(pipefd) == 0, "pipe");
	snprintf(fd_text, sizeof(fd_text), "%d", pipefd[1]);
	setenv("HOSTILE_CTOR_FD", fd_text, 1);
	setenv("HOSTILE_CTOR_LOAD", argv[2], 1);
	/* The program has used dlopen before (most that load plug-ins have). */
	h = dlopen("libc.so.6", RTLD_NOW);
	CHECK(h != NULL, "dlopen(libc.so.6): %s", dlerror());
	dlclose(h);
	alarm(10); /* a deadlock becomes SIGALRM */
	CHECK(pthread_create(&t, NULL, load_with_dlmopen, NULL) == 0, "pthread_create");
	CHECK(read(pipefd[0], &c, 1) == 1, "the constructor did not start");
	m = dlopen("libm.so.6", RTLD_NOW);
	CHECK(m != NULL, "dlopen(libm.so.6): %s", dlerror());
	CHECK(pthread_join(t, &h) == 0 && h != NULL, "dlmopen: %s", dlerror());
	result = dlsym(h, "hostile_ctor_result");
	CHECK(result != NULL, "dlsym: %s", dlerror());
	printf("the constructor's dlopen gave %d\n", *result);
	dlclose(m);
	return 0;
}
