/* MAP_32BIT (x86-64): mappings in the 1 GiB window below 2 GiB that
 * LuaJIT and other JITs use for code they must reach with 32-bit
 * offsets. As many 3 MiB mappings must fit as under glibc, whatever the
 * alignment policy for other large mappings. The case runs with address
 * randomisation off (it moves the window's start by up to 32 MiB), so the
 * two runs count the same window. */
#include "hostile.h"

#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

#define LEN (3 * MiB)
#define MAX 1024

int main(int argc, char **argv)
{
#ifdef MAP_32BIT
	static void *maps[MAX];
	int n = 0;

	(void)argc;
	if (!(personality(0xffffffff) & ADDR_NO_RANDOMIZE)) {
		CHECK(personality(ADDR_NO_RANDOMIZE) != -1, "personality: %s", strerror(errno));
		execv("/proc/self/exe", argv);
		CHECK(0, "exec: %s", strerror(errno));
	}
	while (n < MAX) {
		void *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);

		if (p == MAP_FAILED)
			break;
		CHECK((uintptr_t)p + LEN <= 2 * GiB, "a MAP_32BIT mapping at %p", p);
		*(volatile char *)p = 1;
		maps[n++] = p;
	}
	printf("%d mappings of 3 MiB with MAP_32BIT\n", n);
	while (n > 0)
		CHECK(munmap(maps[--n], LEN) == 0, "munmap: %s", strerror(errno));
	return 0;
#else
	(void)argc;
	(void)argv;
	SKIP("MAP_32BIT exists only on x86-64");
#endif
}
