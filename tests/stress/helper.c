/* The program exec.c runs from its children, with LD_PRELOAD still set:
 * large calloc zero, large and small blocks written and read back, realloc
 * across the threshold, from the main thread and two more at once (so the
 * preload starts up, allocates, pre-zeroes and reports in a fresh image).
 * Exits 0, or with the code of the first check that failed. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "stress.h"

static void *work(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)stress_child_work(0);
}

int main(void)
{
	pthread_t threads[2];
	int rc = stress_child_work(0);

	for (unsigned i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, work, NULL) != 0)
			return 30;
	for (unsigned i = 0; i < 2; i++) {
		void *ret;

		pthread_join(threads[i], &ret);
		if (rc == 0)
			rc = (int)(intptr_t)ret;
	}
	return rc;
}
