/* The range arithmetic of neighbourhood-last clearing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "clear/plan.h"

#define PAGE HZ_SZ_4K
#define BASE ((uintptr_t)1 << 30)

/* The three parts must tile r exactly: left | hot | right, in address
 * order, with no gap and no overlap. */
static void assert_tiles(struct hz_range r, const struct hz_clear_plan *p)
{
	assert_true(p->left.start == r.start);
	assert_true(p->left.end == p->hot.start);
	assert_true(p->hot.end == p->right.start);
	assert_true(p->right.end == r.end);
}

static void no_hint_clears_everything_in_one_pass(void **state)
{
	struct hz_range r = hz_range_make(BASE, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, 0, 2, &p);
	assert_true(hz_range_empty(p.hot));
	assert_true(hz_range_empty(p.left));
	assert_int_equal(hz_range_len(p.right), 64 * PAGE);
	hz_clear_plan_make(r, r.end, 2, &p); /* one past the end: outside */
	assert_true(hz_range_empty(p.hot));
	hz_clear_plan_make(r, r.start - 1, 2, &p);
	assert_true(hz_range_empty(p.hot));
}

static void neighbourhood_in_the_middle_is_five_pages_around_the_hint(void **state)
{
	struct hz_range r = hz_range_make(BASE, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE + 20 * PAGE + 123, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == BASE + 18 * PAGE);
	assert_true(p.hot.end == BASE + 23 * PAGE);
	assert_int_equal(hz_range_len(p.left), 18 * PAGE);
	assert_int_equal(hz_range_len(p.right), 41 * PAGE);
}

static void neighbourhood_at_first_page_shifts_right(void **state)
{
	struct hz_range r = hz_range_make(BASE, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == BASE);
	assert_int_equal(hz_range_len(p.hot), 5 * PAGE);
	assert_true(hz_range_empty(p.left));
	/* Second page: still cannot go 2 pages left, keeps its width. */
	hz_clear_plan_make(r, BASE + PAGE + 7, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == BASE);
	assert_int_equal(hz_range_len(p.hot), 5 * PAGE);
}

static void neighbourhood_at_last_page_shifts_left(void **state)
{
	struct hz_range r = hz_range_make(BASE, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, r.end - 1, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.end == r.end);
	assert_int_equal(hz_range_len(p.hot), 5 * PAGE);
	assert_true(hz_range_empty(p.right));
}

static void neighbourhood_covering_whole_range_is_all_hot(void **state)
{
	struct hz_range r = hz_range_make(BASE, 5 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE + 2 * PAGE, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == r.start && p.hot.end == r.end);
}

static void range_shorter_than_neighbourhood_is_all_hot(void **state)
{
	struct hz_range r = hz_range_make(BASE + 100, 3 * PAGE + 5);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE + 100 + PAGE, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == r.start && p.hot.end == r.end);
}

static void unaligned_range_hint_in_partial_first_page(void **state)
{
	/* The range starts mid-page; the hint's page begins before the range. */
	struct hz_range r = hz_range_make(BASE + 3000, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE + 3001, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == r.start);
	assert_int_equal(hz_range_len(p.hot), 5 * PAGE);
}

static void radius_zero_keeps_only_the_hint_page(void **state)
{
	struct hz_range r = hz_range_make(BASE, 64 * PAGE);
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, BASE + 10 * PAGE + 1, 0, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == BASE + 10 * PAGE);
	assert_int_equal(hz_range_len(p.hot), PAGE);
}

static void range_at_top_of_address_space_does_not_overflow(void **state)
{
	uintptr_t top = UINTPTR_MAX - 64 * PAGE + 1;
	struct hz_range r = { top, UINTPTR_MAX };
	struct hz_clear_plan p;

	(void)state;
	hz_clear_plan_make(r, UINTPTR_MAX - 1, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.end == UINTPTR_MAX);
	assert_int_equal(hz_range_len(p.hot), 5 * PAGE);
	r = hz_range_make(0, 64 * PAGE);
	hz_clear_plan_make(r, 1, 2, &p);
	assert_tiles(r, &p);
	assert_true(p.hot.start == 0);
}

static void range_helpers_clamp_and_align(void **state)
{
	struct hz_range a = { 100, 200 }, b = { 150, 300 }, c = { 300, 400 };
	struct hz_range x;

	(void)state;
	x = hz_range_clamp(a, b);
	assert_true(x.start == 150 && x.end == 200);
	x = hz_range_clamp(a, c);
	assert_true(hz_range_empty(x));
	assert_true(hz_align_down(65537, 65536) == 65536);
	assert_true(hz_align_up(65537, 65536) == 131072);
	assert_true(hz_align_up(65536, 65536) == 65536);
	assert_true(hz_is_pow2(4096) && !hz_is_pow2(0) && !hz_is_pow2(4095));
}

static void range_helpers_split_join_and_overlap(void **state)
{
	struct hz_range r = hz_range_make(BASE, 10 * PAGE), lo, hi;

	(void)state;
	hz_range_split_at(r, BASE + 3 * PAGE, &lo, &hi);
	assert_true(lo.start == r.start && lo.end == BASE + 3 * PAGE);
	assert_true(hi.start == lo.end && hi.end == r.end);
	hz_range_split_at(r, BASE - PAGE, &lo, &hi); /* clamped to the start */
	assert_true(hz_range_empty(lo) && hi.start == r.start && hi.end == r.end);
	hz_range_split_at(r, r.end + PAGE, &lo, &hi); /* clamped to the end */
	assert_true(lo.end == r.end && hz_range_empty(hi) && hi.start == r.end);
	assert_true(hz_range_chunks(r, 4 * PAGE) == 2 && hz_range_chunks(r, 16 * PAGE) == 0);

	hz_range_split_at(r, BASE + 3 * PAGE, &lo, &hi);
	assert_true(hz_range_adjacent(lo, hi) && hz_range_adjacent(hi, lo));
	assert_false(hz_range_overlaps(lo, hi));
	lo = hz_range_join(hi, lo);
	assert_true(lo.start == r.start && lo.end == r.end);
	assert_true(hz_range_overlaps(r, hz_range_make(r.end - 1, PAGE)));
	assert_false(hz_range_adjacent(r, hz_range_make(r.end + 1, PAGE)));
	assert_false(hz_range_overlaps(r, hz_range_make(r.end, PAGE)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_hint_clears_everything_in_one_pass),
		cmocka_unit_test(neighbourhood_in_the_middle_is_five_pages_around_the_hint),
		cmocka_unit_test(neighbourhood_at_first_page_shifts_right),
		cmocka_unit_test(neighbourhood_at_last_page_shifts_left),
		cmocka_unit_test(neighbourhood_covering_whole_range_is_all_hot),
		cmocka_unit_test(range_shorter_than_neighbourhood_is_all_hot),
		cmocka_unit_test(unaligned_range_hint_in_partial_first_page),
		cmocka_unit_test(radius_zero_keeps_only_the_hint_page),
		cmocka_unit_test(range_at_top_of_address_space_does_not_overflow),
		cmocka_unit_test(range_helpers_clamp_and_align),
		cmocka_unit_test(range_helpers_split_join_and_overlap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
