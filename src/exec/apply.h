/* Applying a mode to the segments of loaded objects (apply.c): used at
 * start-up (start.c) and after each dlopen (dlopen.c). */
#ifndef HZ_EXEC_APPLY_H
#define HZ_EXEC_APPLY_H

#include <stdbool.h>

#include "mode.h"

/* Apply mode to objects first_object.. . remap_ok false turns remap into
 * advise (with why_not logged). Serialised internally. */
void hz_exec_apply(enum hz_exec_mode mode, unsigned first_object, bool remap_ok,
		   const char *why_not);

#endif /* HZ_EXEC_APPLY_H */
