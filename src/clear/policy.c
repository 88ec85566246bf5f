#include "policy.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../config.h"
#include "../cpu/cpu.h"
#include "../log.h"

/* Preference for automatic choice, best first; the first runnable one wins.
 * The figures behind the order are in bench/RESULTS.md. */
#if defined(__x86_64__)
/* Cached passes are short (< CLEAR_NT_MIN): glibc's memset picks vector
 * stores or rep stosb by size and is as fast as any of ours there. */
static const char *const auto_cached[] = { "memset" };
/* One 64-byte non-temporal store per line keeps the write-combining buffers
 * full with the fewest instructions. */
static const char *const auto_nt[] = { "avx512_nt", "avx2_nt", "clzero", "rep_stosb", "memset" };
#elif defined(__aarch64__)
static const char *const auto_cached[] = { "mops", "dc_zva", "memset" };
static const char *const auto_nt[] = { "stnp", "memset" };
#else
static const char *const auto_cached[] = { "memset" };
static const char *const auto_nt[] = { "memset" };
#endif

struct choice {
	const struct hz_clear_kernel *cached, *nt;
	bool forced;
};

/* The kernels chosen for the configuration snapshot of generation
 * chosen_generation (0: none yet): from HUGEZERO_CLEAR and the CPU, or
 * forced by hz_clear_set_kernel until the snapshot is replaced. nt_min and
 * radius are not kept: hz_clear_policy_load reads them from the snapshot. */
static struct choice chosen;
static uint64_t chosen_generation;

const struct hz_clear_kernel *hz_clear_kernel_find(const char *name)
{
	for (unsigned i = 0; i < hz_clear_kernel_total; i++)
		if (strcmp(hz_clear_kernels[i].name, name) == 0)
			return &hz_clear_kernels[i];
	return NULL;
}

const char *hz_clear_kernel_missing(const struct hz_clear_kernel *k)
{
	if (!k->built)
		return "not built: the compiler or assembler lacks it";
	if (!hz_cpu_has(k->needs))
		return k->missing;
	return NULL;
}

static const struct hz_clear_kernel *first_usable(const char *const *names,
						  size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct hz_clear_kernel *k = hz_clear_kernel_find(names[i]);

		if (k && hz_clear_kernel_missing(k) == NULL)
			return k;
	}
	return &hz_clear_kernels[0]; /* memset runs everywhere */
}

static void store(const struct choice *k, uint64_t generation)
{
	__atomic_store_n(&chosen.cached, k->cached, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen.nt, k->nt, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen.forced, k->forced, __ATOMIC_RELAXED);
	__atomic_store_n(&chosen_generation, generation, __ATOMIC_RELEASE);
}

static void make_auto(struct choice *k)
{
	k->cached = first_usable(auto_cached, sizeof(auto_cached) / sizeof(auto_cached[0]));
	k->nt = first_usable(auto_nt, sizeof(auto_nt) / sizeof(auto_nt[0]));
	k->forced = false;
}

static void force_kernel(struct choice *k, const struct hz_clear_kernel *kernel)
{
	k->cached = kernel;
	k->nt = kernel;
	k->forced = true;
}

/* The automatic choice, overridden by HUGEZERO_CLEAR when that names a
 * kernel this CPU runs; otherwise one warning and auto. */
static void choose_from(const struct hz_config *c)
{
	const struct hz_clear_kernel *k;
	struct choice p;

	make_auto(&p);
	if (strcmp(c->clear, "auto") != 0) {
		k = hz_clear_kernel_find(c->clear);
		if (k == NULL)
			hz_warn("HUGEZERO_CLEAR=%s is not a clearing kernel of this "
				"architecture (see `hugezero status`); using auto", c->clear);
		else if (hz_clear_kernel_missing(k))
			hz_warn("HUGEZERO_CLEAR=%s cannot run here: %s; using auto",
				c->clear, hz_clear_kernel_missing(k));
		else
			force_kernel(&p, k);
	}
	hz_debug("clear: cached kernel %s, non-temporal kernel %s from %zu bytes",
		 p.cached->name, p.nt->name, c->clear_nt_min);
	store(&p, c->generation);
}

void hz_clear_policy_load(struct hz_clear_policy *out)
{
	const struct hz_config *c = hz_config();

	/* Racing first callers choose the same kernels; the warning for a bad
	 * HUGEZERO_CLEAR may then appear twice, which is acceptable. */
	if (__atomic_load_n(&chosen_generation, __ATOMIC_ACQUIRE) != c->generation)
		choose_from(c);
	out->cached = __atomic_load_n(&chosen.cached, __ATOMIC_RELAXED);
	out->nt = __atomic_load_n(&chosen.nt, __ATOMIC_RELAXED);
	out->forced = __atomic_load_n(&chosen.forced, __ATOMIC_RELAXED);
	out->nt_min = c->clear_nt_min;
	out->radius = (unsigned)c->clear_radius;
}

int hz_clear_policy_force(const char *name)
{
	const struct hz_clear_kernel *k = NULL;
	struct choice p;

	if (name != NULL && strcmp(name, "auto") != 0) {
		k = hz_clear_kernel_find(name);
		if (k == NULL)
			return -EINVAL;
		if (hz_clear_kernel_missing(k))
			return -ENOTSUP;
	}
	make_auto(&p);
	if (k)
		force_kernel(&p, k);
	store(&p, hz_config()->generation);
	return 0;
}

void hz_clear_policy_reset(void)
{
	choose_from(hz_config());
}
