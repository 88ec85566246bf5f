/* hz_blocks_revive's checks on hand-out (src/blocks.c): a span the
 * recycler must not hand out stops the program with one line on stderr,
 * as a double free does. Each case runs in a child process. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "blocks.h"
#include "libc_next.h"
#include "../util.h"

/* Run hand_out in a child; it must die of SIGABRT after printing a line
 * that contains expect. */
static void dies_saying(void (*hand_out)(void), const char *expect)
{
	char out[1024] = "";
	int fds[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		hand_out();
		_exit(0);
	}
	close(fds[1]);
	while ((n = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += n;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("the child was not stopped (status %#x); it said: %s", status, out);
	if (strstr(out, expect) == NULL)
		fail_msg("the child said \"%s\", not \"%s\"", out, expect);
	assert_non_null(strchr(out, '\n'));
	/* One line; under qemu-user, qemu's own report of the signal may follow. */
	const char *rest = strchr(out, '\n') + 1;

	if (strncmp(rest, "qemu: uncaught target signal", 28) == 0)
		rest = strchr(rest, '\n') ? strchr(rest, '\n') + 1 : "";
	assert_string_equal(rest, "");
}

static void revive_live_block(void)
{
	void *p = hz_preload_malloc(8 * MiB);
	struct hz_span span = { hz_range_make((uintptr_t)p, 4 * HZ_GRANULE), HZ_BACKING_THP };

	if (p == NULL || !hz_blocks_owns(p))
		_exit(2);
	hz_blocks_revive(&span); /* a recycler handing it out again */
}

static void revive_unclaimed_span(void)
{
	void *p = hz_preload_malloc(8 * MiB); /* in a 1 GiB region at a random offset */
	size_t offset = (size_t)((uintptr_t)p - hz_reservation.start);
	/* A granule half the region away from the block: never one of its own. */
	size_t away = offset < ((size_t)512 << 20) ? (size_t)768 << 20 : (size_t)128 << 20;
	struct hz_span span = { hz_range_make(hz_reservation.start + away, HZ_GRANULE), HZ_BACKING_THP };

	if (p == NULL || offset >= ((size_t)1 << 30))
		_exit(2);
	hz_blocks_revive(&span);
}

static void revive_span_outside(void)
{
	void *p = hz_preload_malloc(8 * MiB);
	struct hz_span span = { hz_range_make(hz_reservation.end - HZ_GRANULE, 2 * HZ_GRANULE),
				 HZ_BACKING_THP };

	if (p == NULL)
		_exit(2);
	hz_blocks_revive(&span); /* runs past the end */
}

static void handing_out_a_live_block_again_stops_the_program(void **state)
{
	(void)state;
	dies_saying(revive_live_block, "handed out while live");
}

static void handing_out_unclaimed_granules_stops_the_program(void **state)
{
	(void)state;
	dies_saying(revive_unclaimed_span, "is not claimed");
}

static void handing_out_past_the_reservation_stops_the_program(void **state)
{
	(void)state;
	dies_saying(revive_span_outside, "not inside hugezero's reservation");
}

int main(void)
{
	const struct CMUnitTest all[] = {
		cmocka_unit_test(handing_out_a_live_block_again_stops_the_program),
		cmocka_unit_test(handing_out_unclaimed_granules_stops_the_program),
		cmocka_unit_test(handing_out_past_the_reservation_stops_the_program),
	};

	hz_test_library_options();
	return cmocka_run_group_tests(all, NULL, NULL);
}
