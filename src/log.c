#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prim/prim.h"

/* Enough for any message of ours; longer ones are cut, never overflow. */
#define LOG_LINE_MAX 512

static int log_level = HZ_LOG_WARN;

void hz_log_set_level(int level)
{
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

static void write_line(const char *fmt, va_list ap)
{
	static const char prefix[] = "hugezero: ";
	char line[LOG_LINE_MAX];
	size_t len = sizeof(prefix) - 1;
	int n;

	memcpy(line, prefix, len);
	/* vsnprintf with %s/%d/%zu/%p formats writes into the buffer without
	 * allocating in glibc. */
	n = vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);
	if (n < 0)
		n = 0;
	len += (size_t)n < sizeof(line) - len - 1 ? (size_t)n
						  : sizeof(line) - len - 2;
	line[len++] = '\n';
	hz_prim_write_all(2, line, len);
}

void hz_log(enum hz_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if ((int)level > __atomic_load_n(&log_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	write_line(fmt, ap);
	va_end(ap);
	errno = saved;
}

void hz_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	write_line(fmt, ap);
	va_end(ap);
	abort();
}
