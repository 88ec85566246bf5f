/* Linux system calls used by hugezero. See prim.h for the conventions. */
#include "prim.h"

#include <errno.h>
#include <unistd.h>

int hz_prim_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	int saved = errno;
	int ret = 0;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	errno = saved;
	return ret;
}
