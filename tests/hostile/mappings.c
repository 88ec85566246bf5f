/* The program's own anonymous mappings, as the kernel treats them.
 *
 * A growable buffer: mmap it, write its front, mremap it larger. The
 * kernel's mremap grows a range within one mapping only (EFAULT
 * otherwise), so advice on part of the buffer (huge pages on the pages the
 * program has not reached, once its first writes are dense) split it in
 * two and the buffer could no longer grow. Each such case waits up to
 * WAIT_MS for that advice first (it never comes under glibc), so the
 * mremap meets the mapping as the advice left it. Moving it whole
 * (MREMAP_FIXED, no resize) spans mappings since Linux 6.17; before, it
 * failed the same way.
 *
 * Bad arguments: an offset off a page boundary is EINVAL for anonymous
 * mappings too. */
#include "hostile.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LEN (16 * MiB)
#define FRONT (8 * MiB)
#define WAIT_MS 2000

static char *map_and_write_front(void)
{
	char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap(%d MiB): %s", (int)(LEN / MiB), strerror(errno));
	memset(p, 0x5a, FRONT);
	for (int ms = 0; ms < WAIT_MS && !hostile_vmflag(p + FRONT, LEN - FRONT, "hg"); ms += 10)
		usleep(10000);
	if (hostile_vmflag(p + FRONT, LEN - FRONT, "hg"))
		NOTE("the untouched rest was advised huge pages");
	return p;
}

/* Every byte of the front kept, the rest of len zero, then all writable. */
static void check_grown(char *q, size_t len)
{
	size_t off = hz_test_first_nonzero(q + FRONT, len - FRONT);

	for (size_t i = 0; i < FRONT; i += 4096)
		CHECK(q[i] == 0x5a && q[i + 4095] == 0x5a, "front byte %zu lost in the grow", i);
	CHECK(off == len - FRONT, "byte %zu past the front is %#x, not zero", FRONT + off,
	      (unsigned char)q[FRONT + off]);
	memset(q, 0x33, len);
	CHECK(munmap(q, len) == 0, "munmap of the grown buffer: %s", strerror(errno));
}

static int grow_moved(void)
{
	char *p = map_and_write_front();
	char *q = mremap(p, LEN, 2 * LEN, MREMAP_MAYMOVE);

	CHECK(q != MAP_FAILED, "mremap(MREMAP_MAYMOVE) growing the buffer: %s", strerror(errno));
	check_grown(q, 2 * LEN);
	printf("grown to %d MiB\n", (int)(2 * LEN / MiB));
	return 0;
}

/* Moved whole to an address of the program's choice (MREMAP_FIXED), as
 * a buffer relocated next to another does. */
static int moved_fixed(void)
{
	char *to = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p = map_and_write_front();
	char *q;

	CHECK(to != MAP_FAILED, "mmap of the target: %s", strerror(errno));
	q = mremap(p, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	CHECK(q == to, "mremap(MREMAP_FIXED) moving the buffer: %s", strerror(errno));
	check_grown(q, LEN);
	printf("moved\n");
	return 0;
}

static int bad_offset(void)
{
	static const size_t lens[] = { MiB, 4 * MiB, 64 * MiB };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		void *p;

		errno = 0;
		p = mmap(NULL, lens[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 123);
		printf("%zu MiB at offset 123: %s\n", lens[i] / MiB,
		       p == MAP_FAILED ? strerror(errno) : "mapped");
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "moved", grow_moved },
		{ "fixed", moved_fixed },
		{ "bad_offset", bad_offset },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
