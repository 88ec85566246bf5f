/* Force-included into glibc's malloc tests and its support/ test driver
 * when they are built against the installed C library (build.sh): the few
 * macros of glibc's internal build that they use, and nothing else. */
#ifndef HZ_GLIBC_TEST_SHIM_H
#define HZ_GLIBC_TEST_SHIM_H

#include <limits.h> /* temp_file.c: NAME_MAX, from glibc's own build */

/* Symbol visibility inside libc.so: meaningless outside it. */
#define libc_hidden_proto(name)
#define libc_hidden_def(name)
#define attribute_hidden

/* support_test_main.c: the default timeout multiplier (the environment's
 * TIMEOUTFACTOR still overrides it). */
#ifndef TIMEOUTFACTOR
#define TIMEOUTFACTOR 1
#endif

#endif /* HZ_GLIBC_TEST_SHIM_H */
