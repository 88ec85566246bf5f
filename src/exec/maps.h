/* A reader of /proc/PID/maps and /proc/PID/smaps that never allocates: one
 * entry at a time, through a fixed buffer, so it can run inside a host
 * program (dlopen path, exit report) as well as in the tools. */
#ifndef HZ_EXEC_MAPS_H
#define HZ_EXEC_MAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../range.h"

/* Paths longer than this are cut (display only: matching uses inodes and
 * addresses). */
#define HZ_MAP_PATH_MAX 512

struct hz_map {
	struct hz_range range;
	int prot;        /* PROT_READ | PROT_WRITE | PROT_EXEC */
	bool shared;
	uint64_t offset; /* file offset of range.start */
	uint64_t inode;  /* 0 for anonymous memory */
	char path[HZ_MAP_PATH_MAX]; /* "" when anonymous, "[vdso]", ... */
	/* smaps only, in bytes (0 when read from maps) */
	uint64_t rss;
	uint64_t anon_huge;   /* AnonHugePages: PMD-mapped anonymous THP */
	uint64_t file_pmd;    /* FilePmdMapped: PMD-mapped page cache */
	uint64_t shmem_pmd;   /* ShmemPmdMapped */
	uint64_t kernel_page; /* KernelPageSize (hugetlb shows its page size) */
};

struct hz_maps {
	int fd;
	bool smaps;
	bool have_pending; /* buf holds the next entry's header line */
	size_t pos, len;
	char buf[8192];
};

/* pid 0 is the calling process. Returns 0 or a negative errno value. */
int hz_maps_open(struct hz_maps *m, pid_t pid, bool smaps);

/* The next entry: 1 when *out was filled, 0 at the end, or a negative errno
 * value. */
int hz_maps_next(struct hz_maps *m, struct hz_map *out);

void hz_maps_close(struct hz_maps *m);

#endif /* HZ_EXEC_MAPS_H */
