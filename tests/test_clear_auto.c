/* The automatic kernel choice: pinned for synthetic CPUs (feature sets
 * other than this machine's), so that ranking the table cannot change what
 * auto picks for any CPU or size; and run for real at lower CPU levels of
 * this machine through the test core's feature mask (hz_cpu_test_mask, as
 * dav1d's checkasm --cpumask), each level's choice asserted and cleared
 * with. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <cmocka.h>

#include <hugezero.h>
#include "clear/policy.h"
#include "config.h"
#include "cpu/cpu.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The order auto followed before the ranks (the policy's name lists), best
 * first: the reference the ranks must reproduce for every feature set. */
#if defined(__x86_64__)
static const char *const order_cached[] = { "memset" };
static const char *const order_nt[] = { "avx512_nt", "avx2_nt", "clzero", "rep_stosb",
					"memset" };
static const unsigned arch_features = HZ_CPU_ERMS | HZ_CPU_FSRM | HZ_CPU_AVX2 |
				      HZ_CPU_AVX512F | HZ_CPU_CLZERO;
#elif defined(__aarch64__)
static const char *const order_cached[] = { "mops", "dc_zva", "memset" };
static const char *const order_nt[] = { "stnp", "memset" };
static const unsigned arch_features = HZ_CPU_DC_ZVA | HZ_CPU_MOPS;
#endif

struct pin {
	const char *cpu;
	unsigned features;
	const char *cached, *nt;
};

/* Real CPUs' feature sets and the kernels auto gives them. A kernel the
 * compiler could not build (mops with an old assembler) is replaced by the
 * next in the reference order; the test says so. */
static const struct pin pins[] = {
#if defined(__x86_64__)
	{ "baseline x86-64", 0, "memset", "memset" },
	{ "ERMS only (Ivy Bridge)", HZ_CPU_ERMS, "memset", "rep_stosb" },
	{ "ERMS+FSRM, no AVX2 (Tremont)", HZ_CPU_ERMS | HZ_CPU_FSRM, "memset", "rep_stosb" },
	{ "CLZERO only", HZ_CPU_CLZERO, "memset", "clzero" },
	{ "Zen 1 without AVX2 in XCR0", HZ_CPU_CLZERO | HZ_CPU_ERMS, "memset", "clzero" },
	{ "AVX2 only", HZ_CPU_AVX2, "memset", "avx2_nt" },
	{ "Haswell", HZ_CPU_ERMS | HZ_CPU_AVX2, "memset", "avx2_nt" },
	{ "Zen 3 (Milan)", HZ_CPU_ERMS | HZ_CPU_FSRM | HZ_CPU_AVX2 | HZ_CPU_CLZERO,
	  "memset", "avx2_nt" },
	{ "Skylake-X", HZ_CPU_ERMS | HZ_CPU_AVX2 | HZ_CPU_AVX512F, "memset", "avx512_nt" },
	{ "Zen 4 (Genoa)", HZ_CPU_ERMS | HZ_CPU_FSRM | HZ_CPU_AVX2 | HZ_CPU_AVX512F |
	  HZ_CPU_CLZERO, "memset", "avx512_nt" },
	{ "AVX-512F only", HZ_CPU_AVX512F, "memset", "avx512_nt" },
#elif defined(__aarch64__)
	{ "DC ZVA prohibited, no MOPS", 0, "memset", "stnp" },
	{ "Neoverse N1", HZ_CPU_DC_ZVA, "dc_zva", "stnp" },
	{ "MOPS, DC ZVA prohibited", HZ_CPU_MOPS, "mops", "stnp" },
	{ "Armv8.8 with DC ZVA", HZ_CPU_DC_ZVA | HZ_CPU_MOPS, "mops", "stnp" },
#endif
};

static const struct hz_clear_kernel *find(const char *name)
{
	const struct hz_clear_kernel *k = hz_clear_kernel_find(name);

	if (k == NULL)
		fail_msg("no kernel named %s", name);
	return k;
}

/* The first kernel of order[] that runs with these features. */
static const char *reference(const char *const *order, size_t n, unsigned features)
{
	for (size_t i = 0; i < n; i++)
		if (hz_clear_kernel_missing_for(find(order[i]), features) == NULL)
			return order[i];
	return "memset";
}

/* Both roles, and the pick by size at the default threshold. */
static void check_choice(const char *cpu, unsigned features, const char *cached,
			 const char *nt)
{
	const struct hz_clear_kernel *c = NULL, *n = NULL;
	struct hz_clear_policy p = { .nt_min = hz_config()->clear_nt_min };

	hz_clear_auto_for(features, &c, &n);
	if (strcmp(c->name, cached) != 0 || strcmp(n->name, nt) != 0)
		fail_msg("%s (features %#x): auto gives %s / %s, pinned %s / %s", cpu,
			 features, c->name, n->name, cached, nt);
	p.cached = c;
	p.nt = n;
	assert_ptr_equal(hz_clear_policy_pick(&p, 1), c);
	assert_ptr_equal(hz_clear_policy_pick(&p, p.nt_min - 1), c);
	assert_ptr_equal(hz_clear_policy_pick(&p, p.nt_min), n);
	assert_ptr_equal(hz_clear_policy_pick(&p, (size_t)1 << 30), n);
}

static void auto_choice_is_pinned_for_known_cpus(void **state)
{
	(void)state;
	for (size_t i = 0; i < COUNT(pins); i++) {
		const char *cached = pins[i].cached, *nt = pins[i].nt;

		if (!find(cached)->built) {
			cached = reference(order_cached, COUNT(order_cached), pins[i].features);
			print_message("%s: %s is not built here, expecting %s\n", pins[i].cpu,
				      pins[i].cached, cached);
		}
		check_choice(pins[i].cpu, pins[i].features, cached, nt);
	}
}

/* Every subset of this architecture's feature bits, against the old order. */
static void auto_choice_follows_the_reference_order_for_every_feature_set(void **state)
{
	unsigned bits[32], n = 0;

	(void)state;
	for (unsigned b = 0; b < 32; b++)
		if (arch_features & (1u << b))
			bits[n++] = 1u << b;
	for (unsigned subset = 0; subset < (1u << n); subset++) {
		unsigned features = 0;
		char cpu[32];

		for (unsigned b = 0; b < n; b++)
			if (subset & (1u << b))
				features |= bits[b];
		snprintf(cpu, sizeof(cpu), "subset %u", subset);
		check_choice(cpu, features,
			     reference(order_cached, COUNT(order_cached), features),
			     reference(order_nt, COUNT(order_nt), features));
	}
}

/* Ranks are unique in each role (no tie for the table order to break), and
 * memset is ranked in both, so a CPU with nothing still gets a kernel. */
static void ranks_are_unique_and_memset_is_the_floor(void **state)
{
	(void)state;
	assert_int_equal(hz_clear_kernels[0].rank_cached, 1);
	assert_int_equal(hz_clear_kernels[0].rank_nt, 1);
	for (unsigned i = 0; i < hz_clear_kernel_total; i++)
		for (unsigned j = i + 1; j < hz_clear_kernel_total; j++) {
			const struct hz_clear_kernel *a = &hz_clear_kernels[i];
			const struct hz_clear_kernel *b = &hz_clear_kernels[j];

			if (a->rank_cached && a->rank_cached == b->rank_cached)
				fail_msg("%s and %s share cached rank %u", a->name, b->name,
					 a->rank_cached);
			if (a->rank_nt && a->rank_nt == b->rank_nt)
				fail_msg("%s and %s share nt rank %u", a->name, b->name,
					 a->rank_nt);
		}
}

/* hz_clear_kernel_for, the public view, agrees with the pure choice for
 * this machine's own features. */
static void auto_choice_for_this_cpu_is_the_pure_choice(void **state)
{
	const struct hz_clear_kernel *c = NULL, *n = NULL;
	size_t nt_min = hz_config()->clear_nt_min;

	(void)state;
	assert_int_equal(hz_clear_set_kernel("auto"), 0);
	hz_clear_auto_for(hz_cpu_get()->features, &c, &n);
	assert_string_equal(hz_clear_kernel_for(nt_min - 1), c->name);
	assert_string_equal(hz_clear_kernel_for(nt_min), n->name);
}

/* Lower CPU levels, each hiding more than the one before. What auto picks
 * at a level is the reference order over what this CPU has minus the
 * hidden bits, so nothing here assumes the CPU it runs on. */
struct level {
	const char *name;
	unsigned hidden;
};

static const struct level levels[] = {
	{ "as detected", 0 },
#if defined(__x86_64__)
	{ "no AVX-512", HZ_CPU_AVX512F },
	{ "no AVX2", HZ_CPU_AVX512F | HZ_CPU_AVX2 },
	{ "no CLZERO", HZ_CPU_AVX512F | HZ_CPU_AVX2 | HZ_CPU_CLZERO },
	{ "no ERMS/FSRM", HZ_CPU_AVX512F | HZ_CPU_AVX2 | HZ_CPU_CLZERO | HZ_CPU_ERMS |
	  HZ_CPU_FSRM },
#elif defined(__aarch64__)
	{ "no MOPS", HZ_CPU_MOPS },
	{ "no DC ZVA", HZ_CPU_MOPS | HZ_CPU_DC_ZVA },
#endif
};

#define GUARD 4096
#define GUARD_BYTE 0xa5
#define MAX_LEN ((size_t)(2u << 20) + 13)

static void clears_exactly(unsigned char *buf, size_t mis, size_t len, size_t hint_off,
			   const char *level)
{
	unsigned char *dst = buf + GUARD + mis;
	size_t end = GUARD + mis + len;

	memset(buf, GUARD_BYTE, end + GUARD);
	hz_clear(dst, len, hint_off == SIZE_MAX ? NULL : dst + hint_off);
	for (size_t i = 0; i < end + GUARD; i++)
		if (buf[i] != (i >= GUARD + mis && i < end ? 0 : GUARD_BYTE))
			fail_msg("%s: len %zu, misalign %zu, hint %zd: byte %zd is %#x", level,
				 len, mis, (ssize_t)hint_off, (ssize_t)(i - GUARD - mis), buf[i]);
}

/* Every kernel the level hides is refused, by name and by hz_clear_with. */
static void hidden_kernels_are_refused(unsigned features, const char *level)
{
	for (unsigned i = 0; i < hz_clear_kernel_total; i++) {
		const struct hz_clear_kernel *k = &hz_clear_kernels[i];
		const char *why = NULL;
		char byte = 1;

		if (hz_clear_kernel_missing_for(k, features) == NULL)
			continue;
		if (hz_clear_kernel_supported(i, &why) || why == NULL)
			fail_msg("%s: kernel %s is hidden but reported supported", level, k->name);
		assert_int_equal(hz_clear_with(k->name, &byte, 1), ENOTSUP);
		assert_int_equal(byte, 1);
	}
}

static void auto_at_lower_cpu_levels_picks_and_clears(void **state)
{
	static const size_t lengths[] = { 0, 1, 63, 4095, 65535, 65536, 65537,
					  (1u << 20) + 1, MAX_LEN };
	size_t nt_min = hz_config()->clear_nt_min;
	unsigned char *buf = malloc(GUARD + 64 + MAX_LEN + GUARD);
	unsigned detected = hz_cpu_test_mask(0);

	(void)state;
	assert_non_null(buf);
	for (size_t l = 0; l < COUNT(levels); l++) {
		unsigned features = detected & ~levels[l].hidden;
		const char *cached = reference(order_cached, COUNT(order_cached), features);
		const char *nt = reference(order_nt, COUNT(order_nt), features);

		assert_int_equal(hz_cpu_test_mask(levels[l].hidden), detected);
		assert_int_equal(hz_cpu_get()->features, features);
		hz_clear_policy_reset();
		print_message("level %s (features %#x of %#x): %s below %zu bytes, %s from\n",
			      levels[l].name, features, detected, cached, nt_min, nt);
		assert_string_equal(hz_clear_kernel_for(nt_min - 1), cached);
		assert_string_equal(hz_clear_kernel_for(nt_min), nt);
		hidden_kernels_are_refused(features, levels[l].name);
		for (size_t i = 0; i < COUNT(lengths); i++)
			for (size_t mis = 0; mis < 64; mis += 21)
				for (size_t h = 0; h < 3; h++)
					clears_exactly(buf, mis, lengths[i],
						       h == 0 ? SIZE_MAX : h == 1 ? 0 : lengths[i] / 2,
						       levels[l].name);
	}
	/* The last level leaves memset alone, on any CPU of the architecture. */
	assert_string_equal(hz_clear_kernel_for(1), "memset");
	hz_cpu_test_mask(0);
	hz_clear_policy_reset();
	assert_int_equal(hz_cpu_get()->features, detected);
	free(buf);
}

/* Whatever the level test left, the CPU as detected and auto again. */
static int unmask(void **state)
{
	(void)state;
	hz_cpu_test_mask(0);
	hz_clear_policy_reset();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(auto_choice_is_pinned_for_known_cpus),
		cmocka_unit_test(auto_choice_follows_the_reference_order_for_every_feature_set),
		cmocka_unit_test(ranks_are_unique_and_memset_is_the_floor),
		cmocka_unit_test(auto_choice_for_this_cpu_is_the_pure_choice),
		cmocka_unit_test_teardown(auto_at_lower_cpu_levels_picks_and_clears, unmask),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
