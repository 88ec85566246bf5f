/* The range arithmetic of hz_clear: length, misalignment, hint, kernel,
 * neighbourhood radius and non-temporal threshold all from the input. The
 * range is cleared inside a buffer filled with a pattern, between
 * PROT_NONE pages, and every byte of the buffer is compared with a
 * byte-wise reference: zero inside [dst, dst + len), the pattern outside.
 *
 * Input (little-endian, missing bytes read as zero):
 *   0     kernel: index mod (kernel count + 1); the last means auto
 *   1     radius in pages, mod 65 (HUGEZERO_CLEAR_RADIUS is 0..64)
 *   2     bits 0-2: HUGEZERO_CLEAR_NT_MIN choice; bit 3: hz_clear_with
 *         instead of hz_clear; bits 4-7: right shift of the length
 *   3-5   length, mod MAX_LEN + 1, then shifted right
 *   6-7   misalignment of dst from a page boundary, mod 4096
 *   8     hint kind (see hint_of), 9-12 its offset */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include <hugezero.h>

#include "fuzz.h"
#include "options.h"

#define PAGE 4096u
/* 2 MiB + 13: past the default non-temporal threshold (64 KiB) and a whole
 * huge page, odd so the tail is never a whole vector. */
#define MAX_LEN ((2u << 20) + 13)
#define MAX_MISALIGN PAGE
#define GUARD PAGE /* pattern bytes on each side of the cleared range */
/* dst is a page boundary plus the misalignment, placed as near the upper
 * PROT_NONE page as the rounding allows. */
#define AREA (GUARD + MAX_MISALIGN + MAX_LEN + GUARD + PAGE)

static unsigned char *area; /* between two PROT_NONE pages */
/* The byte-wise reference: what each byte of the area holds before the
 * call (never zero), and zeros for the cleared range. */
static unsigned char pattern[AREA];
static const unsigned char zeros[MAX_LEN];
static char nt_min_env[64], radius_env[64];

static const char *const nt_mins[8] = { "4K", "8K", "16K", "64K", "256K", "1M", "4K", "64K" };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	size_t span = ((AREA + PAGE - 1) / PAGE + 2) * PAGE;
	void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)argc;
	(void)argv;
	FUZZ_CHECK(m != MAP_FAILED, "mmap of %zu bytes", span);
	for (size_t i = 0; i < AREA; i++)
		pattern[i] = (unsigned char)((i * 131 + i / 4096) | 1);
	FUZZ_CHECK(mprotect(m, PAGE, PROT_NONE) == 0 &&
		   mprotect((char *)m + span - PAGE, PAGE, PROT_NONE) == 0, "guard pages");
	/* The area ends right at the upper PROT_NONE page. */
	area = (unsigned char *)m + span - PAGE - AREA;
	unsetenv("HUGEZERO_CLEAR");
	/* putenv keeps these buffers: rewriting them changes the variables. */
	strcpy(nt_min_env, "HUGEZERO_CLEAR_NT_MIN=64K");
	strcpy(radius_env, "HUGEZERO_CLEAR_RADIUS=2");
	putenv(nt_min_env);
	putenv(radius_env);
	return 0;
}

/* The hint for kind k: none, inside, just before, at or after the end,
 * far away, or the ends of the address space. Computed as integers: it is
 * only compared, never dereferenced. */
static const void *hint_of(unsigned k, uintptr_t dst, size_t len, uint32_t off)
{
	switch (k % 7) {
	case 1: return (const void *)(dst + (len ? off % len : 0));
	case 2: return (const void *)(dst - 1 - off % (64 * PAGE));
	case 3: return (const void *)(dst + len + off % (64 * PAGE));
	case 4: return (const void *)(dst + ((uintptr_t)off << 20));
	case 5: return (const void *)(off % 2 ? UINTPTR_MAX - off % PAGE : (uintptr_t)1 + off % PAGE);
	case 6: return (const void *)(dst + (len ? len - 1 - off % (len < PAGE ? len : PAGE) : 0));
	default: return NULL;
	}
}

/* Choose radius, threshold and kernel; returns the forced kernel's name,
 * or NULL for auto (also when the CPU lacks the chosen one). */
static const char *configure(const uint8_t *data, size_t size)
{
	unsigned count = hz_clear_kernel_count();
	unsigned k = (unsigned)(fuzz_bytes(data, size, 0, 1) % (count + 1));
	const char *name = k < count ? hz_clear_kernel_name(k) : NULL;
	const char *why = NULL;
	int supported = k < count && hz_clear_kernel_supported(k, &why);

	snprintf(radius_env, sizeof(radius_env), "HUGEZERO_CLEAR_RADIUS=%u",
		 (unsigned)(fuzz_bytes(data, size, 1, 1) % 65));
	snprintf(nt_min_env, sizeof(nt_min_env), "HUGEZERO_CLEAR_NT_MIN=%s",
		 nt_mins[fuzz_bytes(data, size, 2, 1) % 8]);
	hz_options_reload();
	if (name == NULL) {
		FUZZ_CHECK(hz_clear_set_kernel(NULL) == 0, "auto refused");
		return NULL;
	}
	FUZZ_CHECK(hz_clear_set_kernel(name) == (supported ? 0 : ENOTSUP),
		   "kernel %s: supported %d (%s)", name, supported, why ? why : "");
	if (!supported) {
		FUZZ_CHECK(why != NULL, "kernel %s unsupported without a reason", name);
		FUZZ_CHECK(hz_clear_set_kernel(NULL) == 0, "auto refused");
		return NULL;
	}
	return name;
}

/* The first byte of buf that differs from the reference; a plain loop,
 * run only to report a difference memcmp found. */
static size_t first_wrong(const unsigned char *buf, size_t used, size_t lo, size_t hi)
{
	for (size_t i = 0; i < used; i++)
		if (buf[i] != (i >= lo && i < hi ? 0 : pattern[i]))
			return i;
	return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *kernel = configure(data, size);
	unsigned flags = (unsigned)fuzz_bytes(data, size, 2, 1);
	size_t len = (size_t)(fuzz_bytes(data, size, 3, 3) % (MAX_LEN + 1)) >> (flags >> 4);
	size_t mis = (size_t)(fuzz_bytes(data, size, 6, 2) % MAX_MISALIGN);
	unsigned char *end = area + AREA;
	/* Checked: GUARD pattern bytes before dst, everything after the range
	 * up to the PROT_NONE page (at least GUARD bytes), and the range. */
	uintptr_t base = ((uintptr_t)end - GUARD - MAX_MISALIGN - len) & ~(uintptr_t)(PAGE - 1);
	unsigned char *dst = (unsigned char *)base + mis, *buf = dst - GUARD;
	size_t used = (size_t)(end - buf), lo = GUARD, hi = GUARD + len, bad;
	const void *hint = hint_of((unsigned)fuzz_bytes(data, size, 8, 1), (uintptr_t)dst, len,
				   (uint32_t)fuzz_bytes(data, size, 9, 4));

	memcpy(buf, pattern, used);
	if (kernel && (flags & 8))
		FUZZ_CHECK(hz_clear_with(kernel, dst, len) == 0, "hz_clear_with(%s)", kernel);
	else
		hz_clear(dst, len, hint);
	if (memcmp(buf, pattern, lo) != 0 || memcmp(dst, zeros, len) != 0 ||
	    memcmp(buf + hi, pattern + hi, used - hi) != 0) {
		bad = first_wrong(buf, used, lo, hi);
		FUZZ_CHECK(bad == used,
			   "kernel %s, len %zu, misalign %zu, hint %+td: byte %+td is %#x",
			   kernel ? kernel : "auto", len, mis,
			   hint ? (ptrdiff_t)((uintptr_t)hint - (uintptr_t)dst) : 0,
			   (ptrdiff_t)bad - (ptrdiff_t)lo, buf[bad]);
	}
	if (kernel)
		FUZZ_CHECK(strcmp(hz_clear_kernel_for(len), kernel) == 0,
			   "forced kernel %s, yet %s is used for %zu bytes", kernel,
			   hz_clear_kernel_for(len), len);
	return 0;
}
