#include "policy.h"

#include <errno.h>
#include <string.h>

#include "../cpu/cpu.h"
#include "../log.h"
#include "../options.h"

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

static struct hz_clear_policy current;
static int current_ready;

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

static void store(const struct hz_clear_policy *p)
{
	__atomic_store_n(&current.cached, p->cached, __ATOMIC_RELAXED);
	__atomic_store_n(&current.nt, p->nt, __ATOMIC_RELAXED);
	__atomic_store_n(&current.nt_min, p->nt_min, __ATOMIC_RELAXED);
	__atomic_store_n(&current.radius, p->radius, __ATOMIC_RELAXED);
	__atomic_store_n(&current.forced, p->forced, __ATOMIC_RELAXED);
	__atomic_store_n(&current_ready, 1, __ATOMIC_RELEASE);
}

static void make_auto(struct hz_clear_policy *p)
{
	p->cached = first_usable(auto_cached, sizeof(auto_cached) / sizeof(auto_cached[0]));
	p->nt = first_usable(auto_nt, sizeof(auto_nt) / sizeof(auto_nt[0]));
	p->nt_min = (size_t)hz_option_u64(HZ_OPT_CLEAR_NT_MIN);
	p->radius = (unsigned)hz_option_u64(HZ_OPT_CLEAR_RADIUS);
	p->forced = false;
}

static void force_kernel(struct hz_clear_policy *p, const struct hz_clear_kernel *k)
{
	p->cached = k;
	p->nt = k;
	p->forced = true;
}

/* The automatic policy, overridden by HUGEZERO_CLEAR when that names a
 * kernel this CPU runs; otherwise one warning and auto. */
static void compute_from_options(void)
{
	const char *name = hz_option_str(HZ_OPT_CLEAR);
	const struct hz_clear_kernel *k;
	struct hz_clear_policy p;

	make_auto(&p);
	if (strcmp(name, "auto") != 0) {
		k = hz_clear_kernel_find(name);
		if (k == NULL)
			hz_warn("HUGEZERO_CLEAR=%s is not a clearing kernel of this "
				"architecture (see `hugezero status`); using auto", name);
		else if (hz_clear_kernel_missing(k))
			hz_warn("HUGEZERO_CLEAR=%s cannot run here: %s; using auto",
				name, hz_clear_kernel_missing(k));
		else
			force_kernel(&p, k);
	}
	hz_debug("clear: cached kernel %s, non-temporal kernel %s from %zu bytes",
		 p.cached->name, p.nt->name, p.nt_min);
	store(&p);
}

void hz_clear_policy_load(struct hz_clear_policy *out)
{
	/* Racing first callers compute the same answer; the warning for a bad
	 * HUGEZERO_CLEAR may then appear twice, which is acceptable. */
	if (!__atomic_load_n(&current_ready, __ATOMIC_ACQUIRE))
		compute_from_options();
	out->cached = __atomic_load_n(&current.cached, __ATOMIC_RELAXED);
	out->nt = __atomic_load_n(&current.nt, __ATOMIC_RELAXED);
	out->nt_min = __atomic_load_n(&current.nt_min, __ATOMIC_RELAXED);
	out->radius = __atomic_load_n(&current.radius, __ATOMIC_RELAXED);
	out->forced = __atomic_load_n(&current.forced, __ATOMIC_RELAXED);
}

int hz_clear_policy_force(const char *name)
{
	const struct hz_clear_kernel *k = NULL;
	struct hz_clear_policy p;

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
	store(&p);
	return 0;
}

void hz_clear_policy_reset(void)
{
	compute_from_options();
}
