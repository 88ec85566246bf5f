/* Counters of what hugezero did, one table of them (stats.def), updated
 * with relaxed atomics: they are statistics, not synchronisation. Every
 * counter lives in the one struct hz_stats, so that it can later be put in
 * one mapping another process reads. This is a leaf: the exit report that
 * reads the counters is report.c. */
#ifndef HZ_STATS_H
#define HZ_STATS_H

#include <stdint.h>

#include "backing.h"

/* Selects the argument for a row's group (stats.def). */
#define HZ_STATS_PICK_CORE(core, exec, jemalloc) core
#define HZ_STATS_PICK_EXEC(core, exec, jemalloc) exec
#define HZ_STATS_PICK_JEMALLOC(core, exec, jemalloc) jemalloc

enum hz_fallback {
#define HZ_FALLBACK(id, key, doc) HZ_FB_##id,
#include "stats.def"
	HZ_FB_COUNT
};

/* HUGEZERO_EXEC's work on executable text (exec/). */
struct hz_exec_stats {
#define HZ_STAT(group, name, key, type, unit, text, doc) \
	HZ_STATS_PICK_##group(, uint64_t name;, )
#include "stats.def"
};

/* The jemalloc extent hooks' work (jemalloc/hooks.c). */
struct hz_jemalloc_counters {
#define HZ_STAT(group, name, key, type, unit, text, doc) \
	HZ_STATS_PICK_##group(, , uint64_t name;)
#include "stats.def"
};

struct hz_stats {
#define HZ_STAT_BACKINGS(count, bytes, key, doc) \
	uint64_t count[HZ_BACKING_COUNT];        \
	uint64_t bytes[HZ_BACKING_COUNT];
#define HZ_STAT_FALLBACKS(name, key, doc) uint64_t name[HZ_FB_COUNT];
#define HZ_STAT(group, name, key, type, unit, text, doc) \
	HZ_STATS_PICK_##group(uint64_t name;, , )
#include "stats.def"
	struct hz_exec_stats exec;
	struct hz_jemalloc_counters jemalloc;
};

extern struct hz_stats hz_stats;

#define hz_stats_add(field, v) \
	((void)__atomic_add_fetch(&hz_stats.field, (v), __ATOMIC_RELAXED))
#define hz_exec_stat_add(field, v) hz_stats_add(exec.field, (v))
#define hz_jemalloc_stat_add(field, v) hz_stats_add(jemalloc.field, (v))

void hz_stats_fallback(enum hz_fallback why);
void hz_stats_live(int64_t delta); /* tracks live and peak bytes */

/* A copy of every counter, each read atomically (the copy as a whole is
 * not one instant: counters move while it is taken). */
void hz_stats_snapshot(struct hz_stats *out);

/* The JSON key of a fallback reason ("hugetlb_pool_short"), "?" if none. */
const char *hz_fallback_name(enum hz_fallback f);

/* ---- the live page, for `hugezero stats PID` ---- */

/* "HZSTATS1" read as a little-endian word: how another process recognises
 * the header (tools/stats_cmd.c). */
#define HZ_STATS_MAGIC 0x3153544154535a48ull
/* The header's own layout: raise it when a field below changes. A change of
 * the counters is caught by table_hash instead. */
#define HZ_STATS_LAYOUT 1u
/* The header sits at the start of a page-aligned 4 KiB block of its own,
 * named "hugezero-stats" where the kernel names mappings. */
#define HZ_STATS_PAGE 4096u
#define HZ_STATS_MAPPING_NAME "hugezero-stats"

/* What another process needs to read the counters: where they are, and
 * whether its own idea of them is the same (the same stats.def). Written
 * once at start-up, magic last; a fork child inherits the parent's. */
struct hz_stats_header {
	uint64_t magic;         /* HZ_STATS_MAGIC, once the rest is written */
	uint32_t layout;        /* HZ_STATS_LAYOUT */
	uint32_t header_size;   /* sizeof(struct hz_stats_header) */
	uint64_t self;          /* this header's address in its process */
	uint64_t counters;      /* the address of hz_stats */
	uint64_t counters_size; /* sizeof(struct hz_stats) */
	uint64_t table_hash;    /* hz_stats_table_hash() */
	int64_t pid;            /* the process that started hugezero */
	char version[32];       /* the library's version ("0.1.0") */
	char exec_mode[16];     /* HUGEZERO_EXEC in effect ("off", "advise"...) */
};

/* Fill the header and name its page: once, at start-up. exec_mode is
 * HUGEZERO_EXEC's word. Costs one prctl, allocates nothing, and never
 * touches a counter: the counters stay where they are. */
void hz_stats_publish(const char *exec_mode);

/* A hash of the counter table (keys, kinds and offsets, in order), the
 * fallback names and the array lengths: equal in two builds only if they
 * lay out and name the counters alike. */
uint64_t hz_stats_table_hash(void);

/* ---- the table, for the reports ---- */

enum hz_stat_kind {
	HZ_STAT_KIND_LINE,      /* a line of the report starts (heading) */
	HZ_STAT_KIND_VALUE,     /* one counter */
	HZ_STAT_KIND_BACKINGS,  /* count and bytes arrays, per backing */
	HZ_STAT_KIND_FALLBACKS, /* one array, per fallback reason */
};
enum hz_stat_group { HZ_STAT_GROUP_CORE, HZ_STAT_GROUP_EXEC, HZ_STAT_GROUP_JEMALLOC };
enum hz_stat_type { HZ_STAT_TYPE_COUNTER, HZ_STAT_TYPE_GAUGE, HZ_STAT_TYPE_PEAK };
enum hz_stat_unit { HZ_STAT_UNIT_COUNT, HZ_STAT_UNIT_BYTES, HZ_STAT_UNIT_NS };

/* One row of stats.def; see there for what the strings mean. */
struct hz_stat_row {
	unsigned char kind;  /* enum hz_stat_kind */
	unsigned char group; /* enum hz_stat_group */
	unsigned char type;  /* enum hz_stat_type */
	unsigned char unit;  /* enum hz_stat_unit */
	unsigned char used_only; /* LINE: left out of the text while all 0 */
	unsigned short at;   /* offset of the value (first element) in hz_stats */
	unsigned short at2;  /* BACKINGS: offset of the bytes array */
	const char *key;     /* JSON key; LINE: the text heading */
	const char *text;    /* VALUE: text fragment, or NULL */
	const char *doc;
};

extern const struct hz_stat_row hz_stat_rows[];
extern const unsigned hz_stat_row_count;

/* The counter at offset at (a row's at or at2, plus 8 per array index). */
static inline uint64_t hz_stats_value(const struct hz_stats *s, unsigned at)
{
	return *(const uint64_t *)(const void *)((const char *)s + at);
}

#endif /* HZ_STATS_H */
