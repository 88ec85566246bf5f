/* The program maps something of its own with MAP_FIXED over part of a
 * block (a file view placed in a buffer, a shared region): its own
 * mapping, which it may unmap, and which glibc's free unmaps along with
 * the block. The block's next owner must get zeroed anonymous memory, and
 * the file behind a shared view must never be written by anyone but the
 * program. */
#include "hostile.h"

#include <sys/mman.h>
#include <unistd.h>

#define BLOCK (8 * MiB)
#define VIEW_AT (2 * MiB)
#define VIEW (3 * MiB)
#define FILE_LEN (4 * MiB)
#define WRITTEN MiB /* what the program writes through a shared view */

/* A buffer reserved for the view: the program writes nothing else. */
static char *block(void)
{
	void *p = NULL;

	hostile_skip_if_hugetlb_pool(); /* views at 4 KiB granularity */
	CHECK(posix_memalign(&p, 4096, BLOCK) == 0, "posix_memalign");
	return p;
}

static char *map_over(char *p, int flags, int fd)
{
	char *v = mmap(p + VIEW_AT, VIEW, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, 0);

	CHECK(v == p + VIEW_AT, "mmap(MAP_FIXED) over the block: %s", strerror(errno));
	return v;
}

/* The file holds WRITTEN bytes of 0xcd, then 0xab: what the program put
 * there, nothing else. */
static void file_is_intact(int fd)
{
	static unsigned char buf[64 * 1024];

	for (size_t off = 0; off < FILE_LEN; off += sizeof(buf)) {
		unsigned char want = off < WRITTEN ? 0xcd : 0xab;

		CHECK(pread(fd, buf, sizeof(buf), (off_t)off) == (ssize_t)sizeof(buf), "pread");
		for (size_t i = 0; i < sizeof(buf); i++)
			CHECK(buf[i] == want, "the file has %#x at offset %zu, not %#x", buf[i],
			      off + i, want);
	}
}

static int private_file_view(void)
{
	int fd = hostile_temp_file(FILE_LEN, 0xab);
	char *p = block(), *v = map_over(p, MAP_PRIVATE, fd);

	CHECK(v[0] == (char)0xab && v[VIEW - 1] == (char)0xab, "the view does not show the file");
	v[0] = 1; /* a private copy of one page */
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	close(fd);
	return 0;
}

static char *shared_view_written(char *p, int fd)
{
	char *v = map_over(p, MAP_SHARED, fd);

	memset(v, 0xcd, WRITTEN);
	CHECK(msync(v, VIEW, MS_SYNC) == 0, "msync: %s", strerror(errno));
	return v;
}

/* The program unmaps its view, then frees the block. */
static int shared_view_unmapped(void)
{
	int fd = hostile_temp_file(FILE_LEN, 0xab);
	char *p = block(), *v = shared_view_written(p, fd);

	CHECK(munmap(v, VIEW) == 0, "munmap of the program's own view: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	file_is_intact(fd);
	close(fd);
	return 0;
}

/* The program frees the block with its view still in it, after using
 * all the rest of the block. */
static int shared_view_freed(void)
{
	int fd = hostile_temp_file(FILE_LEN, 0xab);
	char *p = block();

	shared_view_written(p, fd);
	memset(p, 1, VIEW_AT);
	memset(p + VIEW_AT + VIEW, 1, BLOCK - VIEW_AT - VIEW);
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	file_is_intact(fd);
	close(fd);
	return 0;
}

/* Shared anonymous memory over part of the block (as a program sets up
 * a region to share with children it forks later). */
static int shared_anonymous_freed(void)
{
	char *p = block(), *v = map_over(p, MAP_SHARED | MAP_ANONYMOUS, -1);

	memset(v, 0xee, VIEW);
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	return 0;
}

/* A memfd (an anonymous file: shared memory handed to another process,
 * a JIT's dual mapping) put over part of the block and written, then the
 * block freed with it in place: the memfd keeps what the program wrote,
 * and the next owners get zero. */
static int memfd_view_freed(void)
{
	static unsigned char fill[64 * 1024];
	int fd = memfd_create("hostile", MFD_CLOEXEC);
	char *p, *v;

	if (fd < 0)
		SKIP("memfd_create: %s", strerror(errno));
	memset(fill, 0xab, sizeof(fill));
	for (size_t off = 0; off < FILE_LEN; off += sizeof(fill))
		CHECK(pwrite(fd, fill, sizeof(fill), (off_t)off) == (ssize_t)sizeof(fill), "pwrite");
	p = block();
	v = map_over(p, MAP_SHARED, fd);
	memset(v, 0xcd, WRITTEN);
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	file_is_intact(fd);
	close(fd);
	return 0;
}

/* The program shrinks its shared view in place with mremap, then unmaps
 * what is left: both are its own mapping's business. */
static int shared_view_shrunk(void)
{
	int fd = hostile_temp_file(FILE_LEN, 0xab);
	char *p = block(), *v = shared_view_written(p, fd);
	char *q = mremap(v, VIEW, MiB, 0);

	CHECK(q == v, "mremap shrinking the program's own view: %s",
	      q == MAP_FAILED ? strerror(errno) : "moved");
	CHECK(q[0] == (char)0xcd && q[MiB - 1] == (char)0xcd, "the view lost the file");
	CHECK(munmap(q, MiB) == 0, "munmap of the shrunk view: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	file_is_intact(fd);
	close(fd);
	return 0;
}

/* The program grows its view to the whole file: the block's memory after
 * it is taken, so the kernel moves the view out (MREMAP_MAYMOVE). */
static int shared_view_moved(void)
{
	int fd = hostile_temp_file(FILE_LEN, 0xab);
	char *p = block(), *v = shared_view_written(p, fd);
	char *q = mremap(v, VIEW, FILE_LEN, MREMAP_MAYMOVE);

	CHECK(q != MAP_FAILED, "mremap growing the program's own view: %s", strerror(errno));
	CHECK(q[0] == (char)0xcd && q[FILE_LEN - 1] == (char)0xab, "the moved view lost the file");
	memset(p, 1, VIEW_AT); /* the rest of the block is still the program's */
	memset(p + VIEW_AT + VIEW, 1, BLOCK - VIEW_AT - VIEW);
	CHECK(munmap(q, FILE_LEN) == 0, "munmap of the moved view: %s", strerror(errno));
	free(p);
	hostile_use_new_block(BLOCK, true);
	hostile_use_new_block(BLOCK, false);
	file_is_intact(fd);
	close(fd);
	return 0;
}

/* munmap and mremap of a pointer malloc returned, 4 KiB at its start (a
 * bug, or a program that confuses its own mappings with malloc's): glibc
 * refuses both (its pointer is not page aligned), the block keeps its
 * bytes, and nothing is printed on the program's stderr. */
static int unmap_malloc_pointer(void)
{
	char *p = malloc(8 * MiB);
	int err;

	CHECK(p != NULL, "malloc");
	hz_test_fill(p, 8 * MiB, 5);
	err = munmap(p, 4096) == 0 ? 0 : errno;
	printf("munmap of the malloc pointer: %s\n", err ? strerror(err) : "unmapped");
	if (err != 0) {
		err = mremap(p, 4096, 8192, 0) == MAP_FAILED ? errno : 0;
		printf("mremap of the malloc pointer: %s\n", err ? strerror(err) : "moved");
		CHECK(hz_test_check(p, 8 * MiB, 5) == 8 * MiB, "the block lost its bytes");
		free(p);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "private_file", private_file_view },
		{ "shared_file_unmapped", shared_view_unmapped },
		{ "shared_file_freed", shared_view_freed },
		{ "shared_anonymous", shared_anonymous_freed },
		{ "memfd", memfd_view_freed },
		{ "shared_file_shrunk", shared_view_shrunk },
		{ "shared_file_moved", shared_view_moved },
		{ "unmap_malloc_pointer", unmap_malloc_pointer },
		{ NULL, NULL },
	};

	return hostile_main(argc, argv, variants);
}
