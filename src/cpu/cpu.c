/* Lazy, thread-safe access to the detected CPU features. */
#include "cpu.h"

#include <pthread.h>

static struct hz_cpu detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
	hz_cpu_detect(&detected);
}

const struct hz_cpu *hz_cpu_get(void)
{
	pthread_once(&detect_once, detect);
	return &detected;
}
