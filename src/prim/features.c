#include "features.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "fault.h"
#include "memory.h"
#include "prim.h"
#include "../sizes.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define PROBE_LEN HZ_SZ_2M

/* Run advice on a fresh 2 MiB private mapping; returns madvise's result. */
static int try_advice(int advice)
{
	void *mem;
	int ret;

	if (hz_prim_mmap(NULL, PROBE_LEN, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &mem) != 0)
		return -ENOMEM;
	ret = hz_prim_madvise(mem, PROBE_LEN, advice);
	hz_prim_munmap(mem, PROBE_LEN);
	return ret;
}

bool hz_feature_populate_write(void)
{
	return try_advice(MADV_POPULATE_WRITE) == 0;
}

bool hz_feature_collapse(void)
{
	void *mem;
	int ret;

	/* MADV_COLLAPSE needs a whole, populated, 2 MiB-aligned range; it
	 * answers EINVAL for anything else, as for an unknown advice. */
	if (hz_prim_map_aligned(PROBE_LEN, PROBE_LEN, 0, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, HZ_TRIM_OR_FAIL, &mem) != 0)
		return false;
	for (size_t off = 0; off < PROBE_LEN; off += HZ_SZ_4K)
		*((volatile char *)mem + off) = 1;
	ret = hz_prim_madvise(mem, PROBE_LEN, MADV_COLLAPSE);
	hz_prim_munmap(mem, PROBE_LEN);
	/* EAGAIN, ENOMEM: the advice exists but could not be served now. */
	return ret != -EINVAL;
}

/* On no file (fd -1): a kernel that has the call answers EBADF before
 * reading its arguments, one without it ENOSYS. */
bool hz_feature_cachestat(void)
{
	uint64_t cached;

	return hz_prim_cachestat(-1, 0, 1, &cached) != -ENOSYS;
}

bool hz_feature_anon_name(void)
{
	void *mem;
	int ret;

	if (hz_prim_mmap(NULL, HZ_SZ_4K, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &mem) != 0)
		return false;
	ret = hz_prim_name_mapping(mem, HZ_SZ_4K, "hugezero-probe");
	hz_prim_munmap(mem, HZ_SZ_4K);
	return ret == 0;
}
