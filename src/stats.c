/* The counters and their table. See stats.h and stats.def. */
#include "stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "prim/prim.h"

struct hz_stats hz_stats;

/* The header alone in its 4 KiB, page-aligned: in a shared library's .bss
 * that is past the last file-backed page, so in the anonymous mapping the
 * loader adds for .bss, which prctl can name (it refuses file mappings).
 * The counters stay in hz_stats: moving them here would change nothing for
 * their cost, but every user names hz_stats. */
static union {
	struct hz_stats_header header;
	char page[HZ_STATS_PAGE];
} stats_page __attribute__((aligned(HZ_STATS_PAGE)));

/* hz_stats_snapshot and hz_stats_value read the struct as an array of
 * counters. */
_Static_assert(sizeof(struct hz_stats) % sizeof(uint64_t) == 0,
	       "struct hz_stats holds only uint64_t counters");
_Static_assert(sizeof(struct hz_stats) <= 0xffff, "offsets fit hz_stat_row.at");

/* HZ_STATS_LINE's when. */
#define WHEN_ALWAYS 0
#define WHEN_USED 1

#define AT(group, name) \
	offsetof(struct hz_stats, HZ_STATS_PICK_##group(name, exec.name, jemalloc.name))

const struct hz_stat_row hz_stat_rows[] = {
#define HZ_STATS_LINE(group_, heading, when)                            \
	{ .kind = HZ_STAT_KIND_LINE, .group = HZ_STAT_GROUP_##group_,   \
	  .used_only = WHEN_##when, .key = (heading) },
#define HZ_STAT(group_, name, key_, type_, unit_, text_, doc_)          \
	{ .kind = HZ_STAT_KIND_VALUE, .group = HZ_STAT_GROUP_##group_,  \
	  .type = HZ_STAT_TYPE_##type_, .unit = HZ_STAT_UNIT_##unit_,   \
	  .at = AT(group_, name), .key = (key_), .text = (text_), .doc = (doc_) },
#define HZ_STAT_BACKINGS(count, bytes, key_, doc_)                      \
	{ .kind = HZ_STAT_KIND_BACKINGS, .at = offsetof(struct hz_stats, count), \
	  .at2 = offsetof(struct hz_stats, bytes), .key = (key_), .doc = (doc_) },
#define HZ_STAT_FALLBACKS(name, key_, doc_)                             \
	{ .kind = HZ_STAT_KIND_FALLBACKS, .at = offsetof(struct hz_stats, name), \
	  .key = (key_), .doc = (doc_) },
#include "stats.def"
};

const unsigned hz_stat_row_count = sizeof(hz_stat_rows) / sizeof(hz_stat_rows[0]);

static const char *const fallback_names[HZ_FB_COUNT] = {
#define HZ_FALLBACK(id, key, doc) [HZ_FB_##id] = (key),
#include "stats.def"
};

const char *hz_fallback_name(enum hz_fallback f)
{
	return (unsigned)f < HZ_FB_COUNT ? fallback_names[f] : "?";
}

void hz_stats_fallback(enum hz_fallback why)
{
	hz_stats_add(fallbacks[why], 1);
}

void hz_stats_live(int64_t delta)
{
	uint64_t live = __atomic_add_fetch(&hz_stats.live_bytes, (uint64_t)delta,
					   __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&hz_stats.peak_bytes, __ATOMIC_RELAXED);

	while (delta > 0 && live > peak &&
	       !__atomic_compare_exchange_n(&hz_stats.peak_bytes, &peak, live, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void hz_stats_snapshot(struct hz_stats *out)
{
	const uint64_t *from = (const uint64_t *)(const void *)&hz_stats;
	uint64_t *to = (uint64_t *)(void *)out;

	for (size_t i = 0; i < sizeof(hz_stats) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

/* FNV-1a, 64 bits, over each value's 8 bytes and each string with its
 * NUL: a layout check, not a defence. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	const char *p = s;

	if (p == NULL) /* a JSON-only row: not the same as "" */
		return (h ^ 0x100) * 0x100000001b3ull;
	do
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	while (*p++ != '\0');
	return h;
}

uint64_t hz_stats_table_hash(void)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = fnv_u64(h, sizeof(struct hz_stats));
	h = fnv_u64(h, HZ_BACKING_COUNT);
	h = fnv_u64(h, HZ_FB_COUNT);
	for (unsigned i = 0; i < hz_stat_row_count; i++) {
		const struct hz_stat_row *r = &hz_stat_rows[i];

		h = fnv_u64(h, (uint64_t)r->kind | (uint64_t)r->group << 8 |
				       (uint64_t)r->type << 16 | (uint64_t)r->unit << 24 |
				       (uint64_t)r->at << 32 | (uint64_t)r->at2 << 48);
		h = fnv_str(h, r->key);
		h = fnv_str(h, r->text);
	}
	for (unsigned f = 0; f < HZ_FB_COUNT; f++)
		h = fnv_str(h, fallback_names[f]);
	return h;
}

static void copy_str(char *to, size_t size, const char *from)
{
	size_t n = from ? strlen(from) : 0;

	n = n < size - 1 ? n : size - 1;
	memcpy(to, from ? from : "", n);
	to[n] = '\0';
}

void hz_stats_publish(const char *exec_mode)
{
	struct hz_stats_header *h = &stats_page.header;
	size_t page = hz_prim_page_size();
	uintptr_t start = (uintptr_t)&stats_page & ~(uintptr_t)(page - 1);
	uintptr_t end = ((uintptr_t)&stats_page + sizeof(stats_page) + page - 1) &
			~(uintptr_t)(page - 1);

	if (__atomic_load_n(&h->magic, __ATOMIC_RELAXED) == HZ_STATS_MAGIC)
		return;
	h->layout = HZ_STATS_LAYOUT;
	h->header_size = (uint32_t)sizeof(*h);
	h->self = (uint64_t)(uintptr_t)h;
	h->counters = (uint64_t)(uintptr_t)&hz_stats;
	h->counters_size = sizeof(hz_stats);
	h->table_hash = hz_stats_table_hash();
	h->pid = (int64_t)hz_prim_getpid();
	copy_str(h->version, sizeof(h->version), HZ_VERSION);
	copy_str(h->exec_mode, sizeof(h->exec_mode), exec_mode);
	/* Release: a reader that sees the magic sees the fields (it reads
	 * through the kernel, which copies in address order on one CPU; the
	 * release orders the writes for it all the same). */
	__atomic_store_n(&h->magic, HZ_STATS_MAGIC, __ATOMIC_RELEASE);
	/* Without CONFIG_ANON_VMA_NAME this fails (EINVAL), and where pages
	 * are larger than 4 KiB the page may hold .data too (EBADF): the
	 * reader then finds the header by its magic (tools/stats_cmd.c). A name on
	 * a larger page also covers its neighbours: only a name. */
	(void)hz_prim_name_mapping((void *)start, end - start, HZ_STATS_MAPPING_NAME);
}
