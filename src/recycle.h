/* Recycling of freed large blocks: they stay mapped, with their huge pages,
 * and are handed out again instead of being returned to the kernel. Each is
 * clean (reads zero) or dirty; calloc takes clean ones first, everything
 * else dirty ones first, and a pre-zero thread turns dirty into clean ahead
 * of demand. These entry points compose the cache's table (cache.h), the
 * pre-zero thread (prezero.h) and the blocks (blocks.h). */
#ifndef HZ_RECYCLE_H
#define HZ_RECYCLE_H

#include <stdbool.h>
#include <stddef.h>

/* A large block of at least size bytes aligned to align (0 for none), from
 * the cache or fresh. With zero, its first size bytes read zero (the rest
 * of the block, as malloc's, need not). Returns 0 or -ENOMEM. */
int hz_recycle_alloc(size_t size, size_t align, bool zero, void **out);

/* Resize a live block (hz_blocks_resize), the cached blocks that its
 * growth would take past the process's own peak given back first. */
int hz_recycle_resize(void *p, size_t size, void **out);

/* Take a live block back into the cache (or release it when the cache is
 * full or disabled). Keeps errno. */
void hz_recycle_free(void *p);

/* Release every span the cache holds (one pass: spans the pre-zero
 * thread holds now come back later, and a refused guard drops nothing).
 * For a program lowering its RLIMIT_AS, or calling mlockall (a cached
 * block would stay locked, or be handed out unlocked). Returns the bytes
 * given back. Keeps errno. */
size_t hz_recycle_drop(void);

/* As hz_recycle_drop, and the span the pre-zero thread holds too, taken
 * from it (waiting for it to stop at its next unit): nothing freed stays
 * cached. For malloc_trim. Returns the bytes given back. Keeps errno. */
size_t hz_recycle_trim(void);

/* fork handlers. */
void hz_recycle_fork_prepare(void);
void hz_recycle_fork_parent(void);
void hz_recycle_fork_child(void);

#endif /* HZ_RECYCLE_H */
