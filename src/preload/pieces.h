/* Runs of small anonymous mmaps sharing 2 MiB windows (pieces.c). */
#ifndef HZ_PRELOAD_PIECES_H
#define HZ_PRELOAD_PIECES_H

#include <stdbool.h>
#include <stddef.h>

/* Whether len (4 KiB aligned) is a piece's size: a power of two from 256
 * KiB to 1 MiB, which a 2 MiB window holds whole, 2 to 8 times. */
bool hz_pieces_size(size_t len);

/* A piece of len bytes (hz_pieces_size) for a plain private anonymous
 * read-write mmap without an address: from a window, on the class's
 * evidence; or mapped alone on 4 KiB pages and kept to be judged. NULL:
 * not served, the caller maps it. */
void *hz_pieces_map(size_t len);

/* The program unmaps, moves or maps over [addr, addr + len): the unused
 * rest of a window there is given back first, so that no piece is ever
 * handed out over a range the program changed. */
void hz_pieces_forget(const void *addr, size_t len);

#endif /* HZ_PRELOAD_PIECES_H */
