/* errno across large allocation calls that succeed: glibc leaves it as the
 * program set it (the program may be between a failing call and its
 * check of errno, with a malloc in its error path). Each entry point, on
 * fresh and reused blocks. */
#include "hostile.h"

#include <malloc.h>
#include <sys/mman.h>

#define MARK 4242

#define KEPT(call)                                                            \
	do {                                                                  \
		errno = MARK;                                                 \
		call;                                                         \
		CHECK(errno == MARK, "%s changed errno to %d (%s)", #call,    \
		      errno, strerror(errno));                                \
	} while (0)

int main(void)
{
	char *a, *b, *c, *d, *m;
	void *e = NULL;

	for (int round = 0; round < 3; round++) {
		KEPT(a = malloc(8 * MiB));
		KEPT(b = calloc(1, 8 * MiB));
		CHECK(a && b, "allocation failed");
		memset(a, 1, 8 * MiB);
		KEPT(a = realloc(a, 24 * MiB));
		KEPT(a = realloc(a, 4 * MiB));
		KEPT(CHECK(posix_memalign(&e, 2 * MiB, 6 * MiB) == 0, "posix_memalign"));
		KEPT(c = aligned_alloc(4096, 4 * MiB));
		KEPT(d = memalign(64, 3 * MiB));
		CHECK(a && c && d, "allocation failed");
		KEPT(m = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0));
		CHECK(m != MAP_FAILED, "mmap");
		memset(m, 2, 8 * MiB);
		KEPT(CHECK(munmap(m, 8 * MiB) == 0, "munmap"));
		memset(b, 3, 8 * MiB);
		KEPT(free(a));
		KEPT(free(b));
		KEPT(free(c));
		KEPT(free(d));
		KEPT(free(e));
	}
	return 0;
}
