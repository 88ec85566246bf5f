/* A minimal allocator in a shared library, as some programs bring their
 * own: the malloc family without malloc_usable_size (nothing requires
 * it). Blocks come from one 1 GiB mapping, each after a 16-byte header
 * holding its size; free keeps nothing (enough for a short test). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARENA ((size_t)1 << 30)
#define HEADER 16

static char *arena;
static size_t used;

/* The raw system call: mmap itself may be interposed. */
static void *take(size_t size, size_t align)
{
	size_t at;

	if (align < HEADER)
		align = HEADER;
	if (arena == NULL) {
		long p = syscall(SYS_mmap, NULL, ARENA, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == -1)
			return NULL;
		arena = (char *)p;
	}
	at = (__atomic_load_n(&used, __ATOMIC_RELAXED) + HEADER + align - 1) & ~(align - 1);
	if (size > ARENA || at > ARENA - size) {
		errno = ENOMEM;
		return NULL;
	}
	__atomic_store_n(&used, at + size, __ATOMIC_RELAXED);
	memcpy(arena + at - HEADER, &size, sizeof(size));
	return arena + at;
}

void *malloc(size_t size) { return take(size, 16); }
void free(void *p) { (void)p; }

void *calloc(size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return take(total, 16); /* fresh anonymous memory is zero */
}

void *realloc(void *p, size_t size)
{
	size_t old = 0;
	void *q = take(size, 16);

	if (p && q) {
		memcpy(&old, (char *)p - HEADER, sizeof(old));
		memcpy(q, p, old < size ? old : size);
	}
	return q;
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = take(size, align);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *memalign(size_t align, size_t size) { return take(size, align); }
void *aligned_alloc(size_t align, size_t size) { return take(size, align); }
