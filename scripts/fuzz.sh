#!/bin/bash
# Fuzz hugezero for a bounded time: the three libFuzzer targets of
# tests/fuzz (option parsing, hz_clear's range arithmetic, recycler
# operation sequences), built with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build/fuzz, each run for HZ_FUZZ_SECONDS
# (default 60), two at a time on the CI machine's two cores. Any crash,
# failed check, sanitizer report, timeout or RSS overrun fails the run.
#
# A failing input is saved under build/fuzz/fuzz-work/<target>/crashes/.
# Reproduce it with build/fuzz/tests/fuzz/<target>_replay FILE (or any
# build's replay binary; HZ_FUZZ_VERBOSE=1 shows fuzz_options' warnings),
# fix the bug, then copy the file into tests/fuzz/corpus/<target>/ with a
# name that says what it found: every build replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

need_packages meson ninja-build clang libclang-rt-14-dev pkg-config libcmocka-dev

seconds=${HZ_FUZZ_SECONDS:-60}
dir=build/fuzz

if [ ! -f "$dir/build.ninja" ]; then
	log=$(CC=clang meson setup "$dir" --werror -Dbench=false -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false 2>&1) || {
		echo "$log" >&2
		exit 1
	}
fi
echo "== $dir: build"
# Only the fuzzers: the rest of the tree is built and tested elsewhere.
ninja -C "$dir" tests/fuzz/fuzz_options tests/fuzz/fuzz_clear tests/fuzz/fuzz_recycle >/dev/null

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:quarantine_size_mb=64
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# run_target NAME MAX_LEN RSS_MB: new inputs go to a scratch corpus (the
# first directory); the checked-in one is only read.
run_target() {
	local t=$1 work=$dir/fuzz-work/$1
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/crashes"
	"$dir/tests/fuzz/$t" -max_total_time="$seconds" -max_len="$2" -rss_limit_mb="$3" \
		-timeout=30 -artifact_prefix="$work/crashes/" -print_final_stats=1 \
		"$work/corpus" "tests/fuzz/corpus/$t" >"$work/log" 2>&1
}

# report NAME STATUS: one line per target, the log's end on failure.
failed=0
report() {
	local t=$1 status=$2 work=$dir/fuzz-work/$1
	local runs
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
	if [ "$status" -eq 0 ]; then
		echo "$t: ${runs:-?} inputs in ${seconds} s, no failure"
		return
	fi
	failed=1
	echo "$t: FAILED (exit status $status) after ${runs:-?} inputs" >&2
	tail -n 60 "$work/log" >&2
	for f in "$work"/crashes/*; do
		[ -e "$f" ] && echo "$t: failing input $f" >&2
	done
}

# Each input of fuzz_recycle is up to 32 operations on blocks of up to
# 16 MiB (128 MiB live, 64 MiB cached): 2 GiB of RSS leaves room for
# ASan's shadow and quarantine. fuzz_clear reads 13 bytes.
echo "== fuzzing, ${seconds} s per target"
run_target fuzz_recycle 128 2048 & recycle=$!
run_target fuzz_options 2048 1024 & options=$!
status=0; wait $options || status=$?; report fuzz_options $status
run_target fuzz_clear 16 1024 & clear=$!
status=0; wait $recycle || status=$?; report fuzz_recycle $status
status=0; wait $clear || status=$?; report fuzz_clear $status
exit $failed
