/* malloc_stats and malloc_info with the blocks in them (issue 25): the
 * next library's text, byte for byte, with the figures glibc keeps for its
 * mmapped chunks (the nearest thing to a block, introspect.c) grown by the
 * live blocks, as if glibc had mmapped them. A profiler that parses the
 * text then sees the program's large memory.
 *
 * Which figures: glibc 2.36's malloc_info counts mmapped chunks in
 * <total type="mmap" count size> only (its <system> lines are its arenas'
 * system_mem, which holds no mmapped chunk); malloc_stats adds them to
 * both lines of "Total (incl. mmap):" (in unsigned int, which wraps at
 * 4 GiB) and reports their high-water marks in "max mmap regions" and
 * "max mmap bytes". Per-arena lines are left alone. */
#include "introspect.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../blocks.h"
#include "../prim/prim.h"

/* The one line of malloc_info's text that counts mmapped chunks (glibc
 * 2.36 malloc.c, __malloc_info: "count=\"%d\" size=\"%zu\""). Rewritten
 * in place into out; when the text has no such line, it is copied as is.
 * Returns 0, or -errno when out could not be written. */
static int rewrite_info(const char *text, size_t len, FILE *out)
{
	static const char tag[] = "<total type=\"mmap\" count=\"";
	const char *at = memmem(text, len, tag, sizeof(tag) - 1), *rest;
	size_t blocks, bytes;
	unsigned long long size;
	long count;
	char *end;

	if (at == NULL)
		return fwrite(text, 1, len, out) == len ? 0 : -EIO;
	count = strtol(at + sizeof(tag) - 1, &end, 10);
	if (strncmp(end, "\" size=\"", 8) != 0)
		return fwrite(text, 1, len, out) == len ? 0 : -EIO;
	size = strtoull(end + 8, &end, 10);
	rest = strchr(end, '\n');
	if (strncmp(end, "\"/>", 3) != 0 || rest == NULL)
		return fwrite(text, 1, len, out) == len ? 0 : -EIO;
	hz_blocks_live_totals(&blocks, &bytes);
	/* n_mmaps is an int, printed with %d: the sum wraps as glibc's would
	 * (converted modulo 2^32, as mallinfo's, introspect.c). */
	count = (int)((unsigned int)count + (unsigned int)blocks);
	if (fwrite(text, 1, (size_t)(at - text), out) != (size_t)(at - text) ||
	    fprintf(out, "%s%ld\" size=\"%llu\"/>", tag, count, size + bytes) < 0 ||
	    fwrite(rest, 1, len - (size_t)(rest - text), out) != len - (size_t)(rest - text))
		return -EIO;
	return 0;
}

/* options other than 0 are refused by glibc with EINVAL before it writes
 * a byte: passed on as they are. The text goes to a stream in memory
 * first (open_memstream, whose buffer comes from malloc: glibc holds no
 * lock of its own while it writes to fp), then, rewritten, to fp. If that
 * stream cannot be had (no memory), glibc writes to fp itself, without the
 * blocks. Not a cancellation point, so the buffer is never lost. Keeps
 * errno. */
HZ_PRIVATE_API int hz_preload_malloc_info(int (*real)(int, FILE *), int options, FILE *fp)
{
	int saved = errno, ret, cancel;
	char *text = NULL;
	size_t len = 0;
	FILE *mem;

	if (real == NULL)
		return ENOSYS;
	if (options != 0)
		return real(options, fp);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	mem = open_memstream(&text, &len);
	if (mem == NULL) {
		ret = real(options, fp);
	} else {
		ret = real(options, mem);
		if (fclose(mem) == 0)
			(void)rewrite_info(text, len, fp);
		free(text);
	}
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return ret;
}

/* ---- malloc_stats ----
 * glibc's writes to stderr, the variable (a program may assign it, and
 * glibc reads it at each call): for the time of the call it points at a
 * stream of ours that keeps what this thread writes. glibc holds an
 * arena's lock while it writes that arena's lines, so keeping them calls
 * nothing that could want one (no malloc, no stdio, no lock): they go to
 * a mapping of our own, grown with mremap. Another thread that picks up
 * the stream meanwhile waits for the stream's lock, then has its text
 * passed on to the real stderr, whose lock it only tries: when another
 * thread holds it (the next caller of malloc_stats may, waiting for the
 * stream), the text goes to stderr's descriptor directly (in order when
 * stderr is unbuffered, as it starts). The stream stays open for good:
 * some thread may hold the pointer. */
struct captured {
	char *text;
	size_t len, size;
	int lost; /* a write did not fit: the text is not whole */
};

static struct captured captured;
static __thread int capturing; /* this thread is in malloc_stats */
static FILE *capture_stream;
static FILE *forward_to; /* the last real stderr */
static int forward_fd = -1; /* and its descriptor */

/* 64 KiB: glibc writes about 75 bytes per arena and makes at most 8 per
 * CPU on 64-bit: room for 100 CPUs before the first mremap. */
#define CAPTURE_FIRST ((size_t)64 << 10)

static int capture_grow(size_t need)
{
	size_t size = captured.size != 0 ? captured.size : CAPTURE_FIRST;
	void *p;
	int ret;

	while (size < need)
		size *= 2;
	if (captured.text == NULL)
		ret = hz_prim_mmap(NULL, size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p);
	else
		ret = hz_prim_mremap(captured.text, captured.size, size, MREMAP_MAYMOVE, NULL,
				     &p);
	if (ret != 0)
		return ret;
	captured.text = p;
	captured.size = size;
	return 0;
}

static ssize_t capture_write(void *cookie, const char *buf, size_t n)
{
	(void)cookie;
	if (!capturing) {
		FILE *to = __atomic_load_n(&forward_to, __ATOMIC_ACQUIRE);
		int fd = __atomic_load_n(&forward_fd, __ATOMIC_RELAXED);

		if (to != NULL && ftrylockfile(to) == 0) {
			size_t written = fwrite_unlocked(buf, 1, n, to);

			funlockfile(to);
			return written == n ? (ssize_t)n : -1;
		}
		return fd >= 0 && hz_prim_write_all(fd, buf, n) == 0 ? (ssize_t)n : -1;
	}
	if (captured.len + n > captured.size && capture_grow(captured.len + n) != 0) {
		captured.lost = 1;
		return (ssize_t)n;
	}
	memcpy(captured.text + captured.len, buf, n);
	captured.len += n;
	return (ssize_t)n;
}

static void capture_open(void)
{
	cookie_io_functions_t io = { .write = capture_write };

	capture_stream = fopencookie(NULL, "w", io);
	/* Unbuffered like stderr: each of glibc's writes reaches
	 * capture_write before glibc lets go of the arena it is about. */
	if (capture_stream != NULL)
		setvbuf(capture_stream, NULL, _IONBF, 0);
}

/* The line "label%10u\n" (or %10lu) that follows at in text, its number
 * grown by add with wrap-around at the printed type's width, written to
 * out with what comes before it. Returns where the rest of text starts,
 * or NULL when the line is not there (nothing written). */
static const char *add_to_line(const char *at, const char *label, int is_long,
			       unsigned long add, FILE *out)
{
	const char *line = strstr(at, label), *num;
	unsigned long v;
	char *end;

	if (line == NULL)
		return NULL;
	num = line + strlen(label);
	v = strtoul(num, &end, 10);
	if (end == num || *end != '\n')
		return NULL;
	fwrite(at, 1, (size_t)(num - at), out);
	if (is_long)
		fprintf(out, "%10lu", v + add);
	else
		fprintf(out, "%10u", (unsigned int)v + (unsigned int)add);
	return end;
}

/* glibc 2.36 malloc.c, __malloc_stats: after "Total (incl. mmap):",
 * system and in-use bytes each include mp_.mmapped_mem, then the most
 * mmapped chunks and bytes ever. The blocks' high-water marks are added to
 * glibc's: an upper bound, exact when the two peaks were at one time (a
 * program whose large blocks are all ours has few mmapped chunks). */
static void rewrite_stats(const char *text, FILE *out)
{
	static const char total[] = "Total (incl. mmap):\n";
	const char *at = strstr(text, total), *p;
	size_t blocks, bytes, peak_blocks, peak_bytes;
	struct {
		const char *label;
		int is_long;
		size_t add;
	} lines[] = {
		{ "system bytes     = ", 0, 0 },
		{ "in use bytes     = ", 0, 0 },
		{ "max mmap regions = ", 0, 0 },
		{ "max mmap bytes   = ", 1, 0 },
	};

	if (at == NULL) {
		fputs(text, out);
		return;
	}
	hz_blocks_live_totals(&blocks, &bytes);
	hz_blocks_peak_totals(&peak_blocks, &peak_bytes);
	lines[0].add = lines[1].add = bytes;
	lines[2].add = peak_blocks;
	lines[3].add = peak_bytes;
	/* Up to the totals as they are: the same labels name arenas' lines. */
	fwrite(text, 1, (size_t)(at - text) + sizeof(total) - 1, out);
	p = at + sizeof(total) - 1;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		const char *next = add_to_line(p, lines[i].label, lines[i].is_long,
					       lines[i].add, out);

		if (next == NULL)
			break;
		p = next;
	}
	fputs(p, out);
}

/* Under the real stderr's lock from first to last, taken before anything
 * of glibc's: calls from two threads take turns, a thread that holds it
 * already (flockfile, then malloc_stats) goes on, as in glibc, and no
 * other thread's text comes between. The stream's lock is taken before
 * stderr points at it, so that no other thread holds it when glibc asks,
 * and kept while the kept text is used. Not a cancellation point, as glibc's
 * is not (it marks stderr so), and errno is kept. When the stream cannot
 * be had, glibc writes its own text. */
HZ_PRIVATE_API void hz_preload_malloc_stats(void (*real)(void))
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int saved = errno, cancel;
	FILE *err = stderr;

	if (real == NULL)
		return;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_once(&once, capture_open);
	if (capture_stream == NULL || err == NULL) {
		real();
		goto out;
	}
	flockfile(err);
	flockfile(capture_stream);
	__atomic_store_n(&forward_fd, fileno_unlocked(err), __ATOMIC_RELAXED);
	__atomic_store_n(&forward_to, err, __ATOMIC_RELEASE);
	captured.len = 0;
	captured.lost = 0;
	capturing = 1;
	stderr = capture_stream;
	real();
	stderr = err;
	capturing = 0;
	if (captured.len != 0 &&
	    (captured.len < captured.size || capture_grow(captured.len + 1) == 0)) {
		captured.text[captured.len] = '\0';
		if (captured.lost)
			fputs(captured.text, err); /* not whole: not ours to rewrite */
		else
			rewrite_stats(captured.text, err);
	}
	funlockfile(capture_stream);
	funlockfile(err);
out:
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}
