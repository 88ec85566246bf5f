/* A library whose constructor loads another library with dlopen (as
 * plug-in hosts and language runtimes do). It tells the program through
 * the descriptor in HOSTILE_CTOR_FD that it started, waits 300 ms (so the
 * program's other thread is inside its own dlopen by then), then opens
 * HOSTILE_CTOR_LOAD. */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int hostile_ctor_result = -1;

__attribute__((constructor)) static void load_from_constructor(void)
{
	const char *fd = getenv("HOSTILE_CTOR_FD"), *path = getenv("HOSTILE_CTOR_LOAD");
	struct timespec pause = { 0, 300 * 1000 * 1000 };
	int (*answer)(void);
	void *h;

	if (fd == NULL || path == NULL || write(atoi(fd), "s", 1) != 1)
		return;
	nanosleep(&pause, NULL);
	h = dlopen(path, RTLD_NOW);
	answer = h ? (int (*)(void))dlsym(h, "hostile_answer") : NULL;
	hostile_ctor_result = answer ? answer() : -2;
}
