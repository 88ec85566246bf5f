/* libhugezero.so's own start-up: the one thing it must do before any
 * call is to hand prim the C library's pthread_create (prim.h says why
 * prim names none). Linked whole into the library and the test programs;
 * in a process that preloads the interposer, the interposer's start hands
 * in the next one and wins whichever runs first. */
#include "prim/prim.h"

#include <pthread.h>

__attribute__((constructor)) static void offer_pthread_create(void)
{
	hz_prim_offer_pthread_create(pthread_create);
}
