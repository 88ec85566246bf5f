/* Messages to stderr that are safe inside a host program: formatted into a
 * stack buffer and written with one write(2), never through stdio and never
 * allocating, with errno preserved. */
#ifndef HZ_LOG_H
#define HZ_LOG_H

enum hz_log_level {
	HZ_LOG_WARN = 0,  /* shown unless HUGEZERO_VERBOSE is negative (never) */
	HZ_LOG_INFO = 1,  /* HUGEZERO_VERBOSE=1: what hugezero decided */
	HZ_LOG_DEBUG = 2, /* HUGEZERO_VERBOSE=2: every decision, for bug reports */
};

/* Messages above this level are dropped. Set from HUGEZERO_VERBOSE. */
void hz_log_set_level(int level);

/* One line "hugezero: <text>\n" on stderr if level is enabled. */
void hz_log(enum hz_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A broken invariant (double free, wild pointer): one line, then stop the
 * program deliberately, as glibc and musl do for a corrupted heap. */
_Noreturn void hz_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define hz_warn(...) hz_log(HZ_LOG_WARN, "warning: " __VA_ARGS__)
#define hz_info(...) hz_log(HZ_LOG_INFO, __VA_ARGS__)
#define hz_debug(...) hz_log(HZ_LOG_DEBUG, __VA_ARGS__)

#endif /* HZ_LOG_H */
