/* CHECK for test programs that run outside cmocka (the hostile cases, the
 * resource scenarios): a failed condition prints where and why on stderr
 * and exits 1; exit and not _exit, so that hugezero still writes its stats. */
#ifndef HZ_TESTS_CHECK_H
#define HZ_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, \
				__LINE__, #cond);                             \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

#endif /* HZ_TESTS_CHECK_H */
