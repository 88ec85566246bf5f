/* The system-call layer: the only code in hugezero that talks to the kernel
 * (system calls, /proc and /sys). Everything above calls these, so a test can
 * make any of them fail and a port needs to touch one folder.
 *
 * Functions return 0 (or a count) on success and a negative errno value on
 * failure, and never change errno. */
#ifndef HZ_PRIM_H
#define HZ_PRIM_H

#include <stddef.h>
#include <sys/types.h>

/* Write all of buf to fd, retrying on EINTR and short writes.
 * Returns 0 or a negative errno value. */
int hz_prim_write_all(int fd, const void *buf, size_t len);

#endif /* HZ_PRIM_H */
