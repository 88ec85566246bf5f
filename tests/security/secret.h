/* A secret to write into large blocks and look for after they are freed,
 * reading through /proc/self/mem (which reports an unmapped range as an
 * error instead of a crash, and reads memory the program may not touch).
 *
 * The secret is one 64-bit word with no zero byte, new in every run, kept
 * in memory only XORed with a mask, so that scanning the process finds the
 * copies written into blocks and not the test's own variable. */
#ifndef HZ_TEST_SECRET_H
#define HZ_TEST_SECRET_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SECRET_MASK 0xa5c3e1f00f1e3c5aull

static volatile uint64_t secret_masked;
static int mem_fd = -1;
/* Static, so reading into it allocates nothing; skipped by the scan. */
static uint64_t mem_buf[(1 << 20) / 8];

static inline uint64_t secret(void)
{
	return secret_masked ^ SECRET_MASK;
}

static inline void secret_init(void)
{
	struct timespec ts;
	uint64_t s;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	s = ((uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid()) *
	    0x9e3779b97f4a7c15ull;
	s |= 0x8080808080808080ull; /* no zero byte */
	secret_masked = s ^ SECRET_MASK;
	if (mem_fd < 0)
		mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
}

/* Write the secret into every stride-th word (stride a multiple of 8). */
static inline void secret_fill(void *p, size_t len, size_t stride)
{
	uint64_t s = secret();

	for (size_t off = 0; off + 8 <= len; off += stride)
		*(volatile uint64_t *)(void *)((char *)p + off) = s;
}

/* Words equal to the secret and non-zero bytes in [start, start + len),
 * read through /proc/self/mem; ranges that cannot be read (unmapped) count
 * as neither. */
struct found {
	size_t secrets;
	size_t nonzero;
	size_t unreadable;
};

static inline void secret_scan(uintptr_t start, size_t len, struct found *f)
{
	uint64_t s = secret();
	uintptr_t buf_lo = (uintptr_t)mem_buf, buf_hi = buf_lo + sizeof(mem_buf);

	while (len > 0) {
		size_t n = len < sizeof(mem_buf) ? len : sizeof(mem_buf);
		ssize_t got;

		if (start < buf_hi && start + n > buf_lo) {
			/* Never scan the buffer with itself. */
			size_t skip = buf_hi - start < len ? buf_hi - start : len;

			start += skip;
			len -= skip;
			continue;
		}
		got = pread(mem_fd, mem_buf, n, (off_t)start);
		if (got <= 0) {
			f->unreadable += 4096;
			n = 4096 < len ? 4096 : len;
		} else {
			n = (size_t)got;
			for (size_t i = 0; i < n / 8; i++) {
				f->secrets += mem_buf[i] == s;
				if (mem_buf[i])
					for (int b = 0; b < 8; b++)
						f->nonzero += (mem_buf[i] >> (8 * b) & 0xff) != 0;
			}
		}
		start += n;
		len -= n;
	}
}

/* Every readable private anonymous mapping of the process except the main
 * stack (the test's locals), which is where freed memory could linger: the
 * heap, hugezero's blocks and cache, jemalloc's extents. Returns how many
 * words hold the secret; *scanned gets the bytes read. */
static inline size_t secret_scan_process(size_t *scanned)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	struct found f = { 0, 0, 0 };

	*scanned = 0;
	if (maps == NULL)
		return (size_t)-1;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi, off;
		char perms[8], path[256] = "";
		unsigned dev_major, dev_minor;
		unsigned long inode;

		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %255s", &lo, &hi, perms, &off,
			   &dev_major, &dev_minor, &inode, path) < 7)
			continue;
		if (perms[0] != 'r' || perms[3] != 'p' || inode != 0 ||
		    (path[0] != '\0' && strcmp(path, "[heap]") != 0))
			continue;
		secret_scan(lo, hi - lo, &f);
		*scanned += hi - lo;
	}
	fclose(maps);
	return f.secrets;
}

#endif /* HZ_TEST_SECRET_H */
