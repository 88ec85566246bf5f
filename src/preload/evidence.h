/* What a range of the program's left on 4 KiB pages says about its size
 * class, read when the program maps the next of its size (evidence.c). */
#ifndef HZ_PRELOAD_EVIDENCE_H
#define HZ_PRELOAD_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

/* Judge [start, start + len), the last mmap of size's class mapped on 4
 * KiB pages (mmap.c) or the last such piece (pieces.c), and note the
 * verdict for the class (hz_class_note_mmap). Unmapped since or untouched:
 * no evidence, nothing noted. */
void hz_evidence_judge(size_t size, uintptr_t start, size_t len);

/* Judge the range the ledger holds for size's class, the last mmap of it
 * left on 4 KiB pages (hz_class_keep_lazy_mmap), if any. */
void hz_evidence_judge_last(size_t size);

#endif /* HZ_PRELOAD_EVIDENCE_H */
