/* See evidence.h. One judge for both kinds of range: the rule is
 * hz_promote_used's (promote_density.h), the decision the ledger's
 * (classes.h: THP at map time for the class's next mmaps, all but a
 * sample). */
#include "evidence.h"

#include "../classes.h"
#include "../log.h"
#include "../promote_density.h"
#include "../sizes.h"

void hz_evidence_judge(size_t size, uintptr_t start, size_t len)
{
	/* Counts for the largest range that may earn its class THP at map
	 * time, on the program's stack. */
	uint16_t resident[HZ_GUESS_MAX / HZ_SZ_2M];
	enum hz_front verdict = hz_promote_used(start, len, resident,
						sizeof(resident) / sizeof(resident[0]));

	hz_debug("mmap of %zu bytes at %p judged at the next of its size: %s", size,
		 (void *)start, verdict == HZ_FRONT_DENSE ? "dense" :
		 verdict == HZ_FRONT_SPARSE ? "sparse" : "no evidence");
	if (verdict != HZ_FRONT_WAIT)
		hz_class_note_mmap(size, verdict == HZ_FRONT_DENSE);
}

void hz_evidence_judge_last(size_t size)
{
	uintptr_t start;
	size_t len;

	if (hz_class_take_lazy_mmap(size, &start, &len))
		hz_evidence_judge(size, start, len);
}
