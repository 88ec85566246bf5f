#!/bin/bash
# The tests that can run under sanitizers, with zero findings:
#
#  build/test-asan  gcc, AddressSanitizer + UndefinedBehaviorSanitizer:
#                   the unit suite (clearing engine, plan, options, exec
#                   units, the fuzz corpus replays), the library suite (the
#                   recycler called as a library) and the jemalloc hook tests
#                   that do not need the preload.
#  build/test-tsan  clang, ThreadSanitizer: the concurrency tests, i.e. the
#                   library suite (8 threads racing the pre-zero thread, fork
#                   while it works, one caller against it) and jemalloc_arena's
#                   four threads sharing one hooked arena.
#
# The preload itself cannot run under either: they interpose malloc.
# Missing Debian packages are installed when run as root (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

need_packages meson ninja-build gcc clang pkg-config libcmocka-dev libjemalloc-dev \
	libclang-rt-14-dev

# setup DIR CC MESON-ARGS...: configure once, warnings are errors; the
# benchmarks never run here, so they are not built.
setup() {
	local dir=$1 cc=$2 log
	shift 2
	[ -f "$dir/build.ninja" ] && return 0
	log=$(CC=$cc meson setup "$dir" --werror -Dbench=false -Db_lundef=false "$@" 2>&1) || {
		echo "$log" >&2
		return 1
	}
}

# run DIR MESON-TEST-ARGS...: cmocka reports a skip to meson as a pass, so
# each reason is shown.
run() {
	local dir=$1
	shift
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
	grep -h '\[  SKIP    \]' "$dir/meson-logs/testlog.txt" | sort -u || true
}

# Every finding stops its test with a failure.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# die_after_fork=0: the fork test's child frees a block, which starts a new
# pre-zero thread there; that is what it checks. No suppressions: a real
# race is fixed, not listed. A report made in the pre-zero thread names
# no function (its sandbox refuses the symbolizer): `addr2line -f -e
# BINARY OFFSET` names the frames it lists as BINARY+OFFSET.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0

echo "== build/test-asan: build"
setup build/test-asan gcc -Db_sanitize=address,undefined
ninja -C build/test-asan >/dev/null
echo "== build/test-asan: unit and library suites"
run build/test-asan --suite unit --suite library
# jemalloc_under_preload and the hostile jemalloc_linked_* case need the
# preload. The jemalloc_arena_<option>
# variants repeat its slowest test (18 s under ASan) once per option;
# jemalloc_hooks_direct's variants cover the same option paths directly.
jemalloc_tests=$(meson test -C build/test-asan --list 2>/dev/null |
	sed -n 's|^[^ ]* / \(jemalloc_[a-z0-9_]*\)$|\1|p' |
	grep -vE '^jemalloc_(under_preload|arena_|linked_)' || true)
if [ -n "$jemalloc_tests" ]; then
	echo "== build/test-asan: jemalloc hooks"
	# shellcheck disable=SC2086 # a list of test names
	run build/test-asan $jemalloc_tests
else
	echo "== build/test-asan: no jemalloc (libjemalloc-dev), hook tests not built"
fi

echo "== build/test-tsan: build"
setup build/test-tsan clang -Db_sanitize=thread
ninja -C build/test-tsan >/dev/null
echo "== build/test-tsan: concurrency tests"
# ThreadSanitizer runs these 5-15x slower: fewer operations, the same mix.
HZ_OPS=4000 HZ_THREAD_OPS=1000 run build/test-tsan --suite library
if [ -n "$jemalloc_tests" ]; then
	# Only the threaded test: the fork test's jemalloc takes every arena
	# lock in its prefork handler, more than ThreadSanitizer's deadlock
	# detector can hold per thread (its CHECK fails, then the run hangs).
	run build/test-tsan --test-args 'four_threads*' jemalloc_arena
fi
