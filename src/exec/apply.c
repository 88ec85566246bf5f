/* Applying HUGEZERO_EXEC to the segments of loaded objects: advise each
 * object's text, and with remap move it onto anonymous THP. See apply.h. */
#include "apply.h"

#include <pthread.h>

#include "../lock.h"
#include "../log.h"
#include "../prim/prim.h"
#include "../stats.h"
#include "advise.h"
#include "folios.h"
#include "perfmap.h"
#include "remap.h"
#include "segments.h"

/* 1024 segments: about 500 objects (text is usually one segment each, two
 * with a separate .init/.plt). Objects past that are skipped, with a
 * message. 80 KiB of static memory, only touched when used. */
#define MAX_SEGMENTS 1024

static struct hz_lock lock = HZ_LOCK_INIT;
static struct hz_exec_segment segs[MAX_SEGMENTS];

/* A fork while another thread held the lock leaves it held in the child
 * by a thread that does not exist there: free it. When the forking thread
 * holds it (fork from a constructor that dlopen runs), it returns through
 * our code and unlocks as usual. */
static void fork_child(void)
{
	if (!hz_lock_held_here(&lock))
		hz_lock_reset(&lock);
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void register_fork_handler(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

static void remap_object(struct hz_exec_segment *first, unsigned n, size_t unit)
{
	struct hz_range moved[16];
	unsigned count = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t start = hz_prim_now_ns();
		struct hz_range r;

		if (hz_exec_remap_segment(&first[i], unit, &r) != 0 || hz_range_empty(r)) {
			hz_exec_stat_add(remap_skipped, 1);
			continue;
		}
		hz_exec_stat_add(remapped_bytes, hz_range_len(r));
		hz_exec_stat_add(remap_ns, hz_prim_now_ns() - start);
		if (count < 16)
			moved[count++] = r;
	}
	if (count > 0 && hz_exec_perfmap_enabled())
		hz_exec_perfmap_write(hz_exec_segment_path(first), first->base, moved, count);
}

static void advise_object(struct hz_exec_segment *first, unsigned n)
{
	int fd = -1;

	for (unsigned i = 0; i < n; i++) {
		if (first[i].vdso)
			continue;
		if (fd < 0)
			fd = hz_prim_open_read(hz_exec_segment_path(&first[i]));
		hz_exec_advise_segment(&first[i], fd);
	}
	if (fd >= 0)
		hz_prim_close(fd);
}

/* Segments of one object are adjacent after sorting by address (an
 * object's mappings do not interleave with another's). */
static unsigned object_run(const struct hz_exec_segment *s, unsigned left)
{
	unsigned n = 1;

	while (n < left && s[n].object == s[0].object)
		n++;
	return n;
}

void hz_exec_apply(enum hz_exec_mode mode, unsigned first_object, bool remap_ok,
		   const char *why_not)
{
	unsigned count, objects;
	size_t unit = 0;

	/* Every size here (64 KiB chunks, 2 MiB PMDs) assumes 4 KiB pages. */
	if (mode == HZ_EXEC_OFF || hz_prim_page_size() != HZ_SZ_4K)
		return;
	pthread_once(&fork_handler_once, register_fork_handler);
	hz_lock(&lock);
	if (hz_exec_segments(segs, MAX_SEGMENTS, first_object, &count, &objects) != 0)
		hz_info("exec: more than %d executable segments; the rest are left alone",
			MAX_SEGMENTS);
	if (mode == HZ_EXEC_REMAP && !remap_ok) {
		hz_info("exec: remap not done (%s); advising instead", why_not);
		mode = HZ_EXEC_ADVISE;
	}
	if (mode == HZ_EXEC_REMAP) {
		unit = hz_exec_anon_thp_unit();
		if (unit == 0) {
			hz_info("exec: anonymous THP is off (sysfs); remap would only "
				"make text private: advising instead");
			mode = HZ_EXEC_ADVISE;
		}
	}
	hz_exec_segments_match_maps(segs, count);
	for (unsigned i = 0; i < count; i++) {
		hz_exec_stat_add(segments, 1);
		hz_exec_stat_add(text_bytes, hz_range_len(segs[i].map));
	}
	for (unsigned i = 0, n; i < count; i += n) {
		n = object_run(&segs[i], count - i);
		if (mode == HZ_EXEC_ADVISE || mode == HZ_EXEC_REMAP)
			advise_object(&segs[i], n);
		if (mode == HZ_EXEC_REMAP)
			remap_object(&segs[i], n, unit);
	}
	hz_unlock(&lock);
}

