/* Lazy, thread-safe access to the detected CPU features. */
#include "cpu.h"

#include <pthread.h>

static struct hz_cpu detected;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
#ifdef HZ_TEST_CORE
static unsigned detected_features; /* before hz_cpu_test_mask hid any */
#endif

static void detect(void)
{
	hz_cpu_detect(&detected);
#ifdef HZ_TEST_CORE
	detected_features = detected.features;
#endif
}

const struct hz_cpu *hz_cpu_get(void)
{
	pthread_once(&detect_once, detect);
	return &detected;
}

#ifdef HZ_TEST_CORE
unsigned hz_cpu_test_mask(unsigned hidden)
{
	pthread_once(&detect_once, detect);
	__atomic_store_n(&detected.features, detected_features & ~hidden,
			 __ATOMIC_RELAXED);
	return detected_features;
}
#endif
