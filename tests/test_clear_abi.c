/* Every clearing kernel this CPU runs keeps the calling convention, checked
 * the way checkasm does it: called through an asm trampoline (clear_abi.c)
 * with random values in the callee-saved registers (x86_64: rbx, rbp,
 * r12-r15; aarch64: x19-x28, d8-d15) and junk in the caller-saved ones, the
 * kernel must return them unchanged, with DF clear, MXCSR and the x87
 * control word (x86_64) or FPCR and the frame pointer (aarch64) as they
 * were, no dirty upper YMM state left behind (checkasm's missing-vzeroupper
 * check, where XGETBV(1) exists), and exactly its range zeroed. Kernels the
 * CPU lacks are skipped with their reason. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <hugezero.h>
#include "clear/kernel.h"
#include "clear/policy.h"
#include "clear_abi.h"

#define GUARD 4096
#define GUARD_BYTE 0xa5
#define MAX_LEN ((size_t)(2u << 20) + 13)

#if defined(__x86_64__)
static const char *const saved_names[ABI_SAVED] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
#define DF_BIT (1u << 10)
/* XINUSE bit 2: the upper halves of ymm0-15 are not in their initial
 * (zero) state, i.e. vzeroupper is missing. */
#define XINUSE_AVX (1u << 2)
#elif defined(__aarch64__)
static const char *const saved_names[ABI_SAVED] = {
	"x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
	"d8", "d9", "d10", "d11", "d12", "d13", "d14", "d15" };
#endif

static uint64_t seed;

/* xorshift64*: a new value for every register of every call. */
static uint64_t next_random(void)
{
	seed ^= seed >> 12;
	seed ^= seed << 25;
	seed ^= seed >> 27;
	return seed * 0x2545f4914f6cdd1dULL;
}

/* Whether the trampoline can read XINUSE: XCR0 enables AVX state and
 * CPUID.(0Dh,1):EAX[2] says XGETBV takes ECX = 1. */
static int can_check_avx(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return 0;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 0x6u) != 0x6u || __get_cpuid_max(0, NULL) < 0xd)
		return 0;
	__cpuid_count(0xd, 1, a, b, c, d);
	return (a & (1u << 2)) != 0;
#else
	return 0;
#endif
}

/* The control state the kernel must leave as it found it. */
struct control {
	uint64_t a, b;
};

static struct control control_now(void)
{
	struct control c = { 0, 0 };
#if defined(__x86_64__)
	uint32_t mxcsr;
	uint16_t cw;

	__asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
	__asm__ __volatile__("fnstcw %0" : "=m"(cw));
	c.a = mxcsr;
	c.b = cw;
#elif defined(__aarch64__)
	__asm__ __volatile__("mrs %0, fpcr" : "=r"(c.a));
#endif
	return c;
}

/* One checked call; returns 0 or fails with what broke. With expect_abi 0
 * (the bad kernels) it returns instead a bit per broken rule: 1 a register,
 * 2 DF or the control state, 4 the bytes, 8 dirty upper YMM state. */
static int checked(abi_kernel_fn fn, const char *name, int nt, unsigned char *buf,
		   size_t mis, size_t len, int check_avx, int expect_abi)
{
	struct abi_state s = { .check_avx = (uint64_t)check_avx };
	struct control before = control_now(), after;
	unsigned char *dst = buf + GUARD + mis;
	int broken = 0;

	for (unsigned r = 0; r < ABI_SAVED; r++)
		s.set[r] = next_random();
	memset(buf, GUARD_BYTE, GUARD + mis + len + GUARD);
	abi_checked_call(fn, dst, len, &s);
	if (nt)
		hz_clear_fence();
	for (unsigned r = 0; r < ABI_SAVED; r++)
		if (s.got[r] != s.set[r]) {
			broken |= 1;
			if (expect_abi)
				fail_msg("%s, len %zu, misalign %zu: %s was %#llx, now %#llx", name,
					 len, mis, saved_names[r], (unsigned long long)s.set[r],
					 (unsigned long long)s.got[r]);
		}
#if defined(__x86_64__)
	after = (struct control){ s.mxcsr & 0xffffffffu, s.fpucw & 0xffffu };
	if (s.flags & DF_BIT)
		broken |= 2;
	if (s.xinuse & XINUSE_AVX) {
		broken |= 8;
		if (expect_abi)
			fail_msg("%s, len %zu: returns with dirty upper YMM state (no "
				 "vzeroupper)", name, len);
	}
#elif defined(__aarch64__)
	after = (struct control){ s.flags, 0 };
	if (s.fp_delta != 0) {
		broken |= 1;
		if (expect_abi)
			fail_msg("%s, len %zu: x29 (the frame pointer) changed", name, len);
	}
#endif
	if (after.a != before.a || after.b != before.b)
		broken |= 2;
	if (expect_abi && (broken & 2))
		fail_msg("%s, len %zu: DF or the FP control state changed (%#llx/%#llx -> "
			 "%#llx/%#llx)", name, len, (unsigned long long)before.a,
			 (unsigned long long)before.b, (unsigned long long)after.a,
			 (unsigned long long)after.b);
	for (size_t i = 0; i < GUARD + mis + len + GUARD; i++)
		if (buf[i] != (i >= GUARD + mis && i < GUARD + mis + len ? 0 : GUARD_BYTE)) {
			broken |= 4;
			if (expect_abi)
				fail_msg("%s, len %zu, misalign %zu: byte %zd is %#x", name, len,
					 mis, (ssize_t)(i - GUARD - mis), buf[i]);
			break;
		}
	return broken;
}

static void kernel_keeps_the_calling_convention(void **state)
{
	static const size_t lengths[] = { 0, 1, 15, 16, 31, 63, 64, 65, 127, 128, 129, 255,
					  256, 257, 4095, 4096, 65537, MAX_LEN };
	const struct hz_clear_kernel *k = &hz_clear_kernels[(uintptr_t)*state];
	const char *why = hz_clear_kernel_missing(k);
	int check_avx = can_check_avx();
	unsigned char *buf;

	if (why) {
		print_message("[  SKIP    ] kernel %s: %s\n", k->name, why);
		skip();
	}
	buf = malloc(GUARD + 64 + MAX_LEN + GUARD);
	assert_non_null(buf);
	for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
		for (size_t mis = 0; mis < 64; mis += 7)
			checked(k->fn, k->name, k->nontemporal, buf, mis, lengths[l],
				check_avx, 1);
	free(buf);
}

/* The check is live: it sees two callee-saved registers overwritten (and
 * DF left set on x86_64), upper YMM state left dirty, and a kernel that stores vector register 0
 * without zeroing it first writes the trampoline's junk, not zeros. */
static void check_catches_clobbers_and_stale_vectors(void **state)
{
	unsigned char buf[GUARD + 16 + GUARD];
	int broken;

	(void)state;
	broken = checked(abi_clobbering_kernel, "clobbering", 0, buf, 0, 0, 0, 0);
	assert_true(broken & 1);
#if defined(__x86_64__)
	assert_true(broken & 2);
#endif
	broken = checked(abi_stale_vector_kernel, "stale vector", 0, buf, 0, 16, 0, 0);
	assert_int_equal(broken, 4);
#if defined(__x86_64__)
	if (can_check_avx()) {
		broken = checked(abi_dirty_upper_kernel, "dirty upper", 0, buf, 0, 0, 1, 0);
		assert_int_equal(broken, 8);
	} else {
		print_message("XGETBV(1) not available: the vzeroupper check is not run\n");
	}
#endif
	/* memset, under the same trampoline, passes every rule. */
	assert_int_equal(checked(hz_clear_memset, "memset", 0, buf, 0, 16, can_check_avx(), 0),
			 0);
}

int main(void)
{
	unsigned n = hz_clear_kernel_total;
	struct CMUnitTest *tests = calloc(n + 1, sizeof(*tests));
	char (*names)[96] = calloc(n, sizeof(*names));

	if (!tests || !names)
		return 1;
	seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	printf("register values from seed %#llx\n", (unsigned long long)seed);
#if defined(__x86_64__)
	if (!can_check_avx())
		printf("[  SKIP    ] vzeroupper check: no AVX state or no XGETBV(1) here\n");
#endif
	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "kernel_%s_keeps_the_calling_convention",
			 hz_clear_kernels[i].name);
		tests[i] = (struct CMUnitTest){ .name = names[i],
			.test_func = kernel_keeps_the_calling_convention,
			.initial_state = (void *)(uintptr_t)i };
	}
	tests[n] = (struct CMUnitTest)cmocka_unit_test(check_catches_clobbers_and_stale_vectors);
	return _cmocka_run_group_tests("clear_abi", tests, n + 1, NULL, NULL);
}
