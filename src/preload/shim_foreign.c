/* Blocks the program changes (src/preload/foreign.h): each wrapper tells
 * libhugezero.so which blocks the call touches, then makes the real call,
 * found here with RTLD_NEXT (see shim.h). */
#include <stdarg.h>
#include <sys/ioctl.h>

#include "foreign.h"
#include "shim.h"

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(void *, size_t, int), "mprotect", addr, len, prot);
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(void *, size_t, int, int), "pkey_mprotect", addr, len, prot,
			 pkey);
}

EXPORT int mlock(const void *addr, size_t len)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(const void *, size_t), "mlock", addr, len);
}

EXPORT int mlock2(const void *addr, size_t len, unsigned int flags)
{
	hz_foreign_changed(addr, len);
	return CALL_NEXT(int (*)(const void *, size_t, unsigned int), "mlock2", addr, len, flags);
}

EXPORT int mlockall(int flags)
{
	int ret;

	hz_foreign_lock_all_begin(flags);
	ret = CALL_NEXT(int (*)(int), "mlockall", flags);
	hz_foreign_lock_all_end(flags, ret);
	return ret;
}

EXPORT int munlockall(void)
{
	int ret = CALL_NEXT(int (*)(void), "munlockall");

	hz_foreign_unlock_all_end(ret);
	return ret;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	hz_foreign_advised(addr, len, advice);
	return CALL_NEXT(int (*)(void *, size_t, int), "madvise", addr, len, advice);
}

/* glibc's posix_madvise makes the system call itself, past madvise. It
 * returns an error number, not -1. */
EXPORT int posix_madvise(void *addr, size_t len, int advice)
{
	int (*fn)(void *, size_t, int) = NEXT(int (*)(void *, size_t, int), "posix_madvise");

	hz_foreign_advised(addr, len, advice);
	return fn ? fn(addr, len, advice) : ENOSYS;
}

/* One pointer-sized argument or none: what every ioctl request takes. */
EXPORT int ioctl(int fd, unsigned long request, ...)
{
	void *arg;
	va_list ap;
	int ret;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	ret = CALL_NEXT(int (*)(int, unsigned long, void *), "ioctl", fd, request, arg);
	hz_foreign_ioctl_end(request, arg, ret);
	return ret;
}
