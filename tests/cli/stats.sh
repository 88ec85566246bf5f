#!/bin/bash
# hugezero stats PID: a real process under the preload read while it runs
# (text, JSON, --watch, a version mismatch), and the errors a user can hit:
# a process without hugezero, a pid that does not exist, a process of
# another user (as root, dropping to nobody), one that exits while watched.
# usage: stats.sh HUGEZERO_BIN STATS_TARGET_BIN
set -uo pipefail
hz=$1
target=$2
passed=0
failed=0
tmp=$(mktemp -d)
pids=()

cleanup() {
	exec 3>&- 4>&- 5>&- 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../check.sh"

# Starts stats_target [MODE] under the preload on fd $1's fifo; sets $pid
# once it printed "ready" (it waits until that fd closes).
start_target() {
	local fd=$1 mode=${2:-}
	rm -f "$tmp/ctl$fd" "$tmp/ready$fd"
	mkfifo "$tmp/ctl$fd"
	"$hz" run "$target" ${mode:+"$mode"} <"$tmp/ctl$fd" >"$tmp/ready$fd" 2>"$tmp/err$fd" &
	pid=$!
	pids+=("$pid")
	eval "exec $fd>\"$tmp/ctl$fd\""
	for _ in $(seq 100); do
		grep -q ready "$tmp/ready$fd" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "stats_target did not start:"; cat "$tmp/err$fd"
	return 1
}

check "--help lists stats" bash -c "'$hz' --help | grep -q 'stats \[--json\]'"
check "stats --help exits 0 and documents --json and --watch" \
	bash -c "'$hz' stats --help | grep -q -- '--json' && '$hz' stats --help | grep -q -- '--watch \[SECONDS\]'"
check "stats of something not a PID is a usage error (2)" [ "$(status_of "$hz" stats abc)" = 2 ]
check "stats with an unknown option is a usage error (2)" [ "$(status_of "$hz" stats --frob 1)" = 2 ]

if ! start_target 3; then
	echo "FAIL: the target process under the preload"
	exit 1
fi
live=$pid
timeout 20 "$hz" stats "$live" >"$tmp/text" 2>&1
check "stats PID of a process under the preload exits 0" [ $? = 0 ]
check "the text report names the pid" grep -qx "hugezero: stats for pid $live" "$tmp/text"
before=$failed
# The block freed and asked for again is reused unless the pre-zero thread
# still holds it (a busy machine): reused + fresh is what is sure.
check "the text report counts the large requests (5), the calloc, reused + fresh" \
	bash -c "grep -q 'large requests  5 served, peak 112.0 MiB live' '$tmp/text' &&
		grep -q 'calloc          1 calls, 16.0 MiB' '$tmp/text' &&
		grep -Eq 'recycling       (1 reused, 4|0 reused, 5) fresh' '$tmp/text'"
[ "$failed" = "$before" ] || { echo "the report:"; cat "$tmp/text"; }
# The same report as the exit summary: the same lines, each with its heading
# (the exit report adds the exec folio lines, a scan of its own page tables).
# The lines shown only once used (reuse policy, zeroing, lazy huge pages) count
# the background thread's work, which two runs of the target need not share:
# they are left out of the comparison.
used_only='^hugezero:   (reuse policy|zeroing|lazy huge pages|jemalloc hooks) '
HUGEZERO_STATS=1 "$hz" run "$target" </dev/null 2>&1 >/dev/null |
	grep -v 'exec folios' | grep -Ev "$used_only" | cut -c1-27 |
	sed 's/ for pid .*//' >"$tmp/exit_headings"
grep -Ev "$used_only" "$tmp/text" | cut -c1-27 | sed 's/ for pid .*//' >"$tmp/live_headings"
check "the text report has the exit report's lines, in order" \
	diff "$tmp/exit_headings" "$tmp/live_headings"

timeout 20 "$hz" stats --json "$live" >"$tmp/json" 2>&1
check "stats --json exits 0" [ $? = 0 ]
before=$failed
check "the JSON has the pid and the counters that are not 0" \
	bash -c "grep -q '^{\"pid\": $live, \"large_requests\": 5, \"peak_bytes\": 117440512' '$tmp/json' &&
		grep -q '\"callocs\": 1, \"calloc_bytes\": 16777216' '$tmp/json' &&
		grep -Eq '\"cache_hits\": (1, \"cache_misses\": 4|0, \"cache_misses\": 5)' '$tmp/json' &&
		grep -q '\"exec\": {\"mode\": \"' '$tmp/json'"
[ "$failed" = "$before" ] || { echo "the JSON:"; cat "$tmp/json"; }
if command -v python3 >/dev/null; then
	check "the JSON parses" python3 -c "import json, sys; json.load(open('$tmp/json'))"
else
	echo "SKIP: JSON syntax check (no python3)"
fi

timeout 20 "$hz" stats >"$tmp/list" 2>/dev/null
check "stats without a PID exits 0" [ $? = 0 ]
check "stats without a PID lists the process: pid, live MiB, ..., command" \
	grep -Eq "^ *$live +112\.0 +[0-9.]+ +[0-9.]+  stats_target\$" "$tmp/list"
check "--json without a PID is a usage error (2)" [ "$(status_of "$hz" stats --json)" = 2 ]

check "--watch with SECONDS out of range is a usage error (2)" \
	[ "$(status_of "$hz" stats --watch 0 "$live")" = 2 ]
timeout 2.5 "$hz" stats --watch 0.2 "$live" >"$tmp/watch" 2>&1
check "--watch SECONDS runs until stopped (timeout's 124)" [ $? = 124 ]
check "--watch prints a report per sample and what changed between" \
	bash -c "[ \$(grep -c 'stats for pid $live' '$tmp/watch') -ge 3 ] &&
		grep -Eq '^hugezero:   (nothing changed )?in the last 0\.[0-9] s' '$tmp/watch'"
timeout 1.5 "$hz" stats --json --watch "$live" >"$tmp/watchjson" 2>&1
check "--json --watch (default interval) prints JSON objects" \
	bash -c "[ \$(grep -c '^{\"pid\": $live' '$tmp/watchjson') -ge 1 ]"

# Another user may not read it: root dropping to nobody.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "SKIP: another user's process (needs root and setpriv)"
elif ! setpriv --reuid=nobody --regid=nogroup --clear-groups "$hz" --version >/dev/null 2>&1; then
	echo "SKIP: another user's process (nobody cannot run $hz from here)"
else
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$hz" stats "$live" \
		>"$tmp/other" 2>&1
	check "another user's process: exit status 1" [ $? = 1 ]
	check "another user's process: says permission denied and what to do" \
		bash -c "grep -q 'permission denied reading process $live' '$tmp/other' &&
			grep -q 'run this as that user or as root' '$tmp/other'"
fi

# The process exits while watched: the watch ends with 1 and says so.
timeout 20 "$hz" stats --watch 0.1 "$live" >/dev/null 2>"$tmp/exited" 3>&- &
watcher=$!
sleep 0.3
exec 3>&-
wait "$watcher"
check "a watched process that exits ends the watch with 1" [ $? = 1 ]
check "... and says it exited" grep -q "hugezero stats: process $live exited" "$tmp/exited"

# Another version's header.
if start_target 4 other-layout; then
	timeout 20 "$hz" stats "$pid" >"$tmp/version" 2>&1
	check "another stats layout: exit status 1" [ $? = 1 ]
	check "another stats layout: says which and what to do" \
		bash -c "grep -q 'stats header has layout 2' '$tmp/version' &&
			grep -q 'use the hugezero command of the version' '$tmp/version'"
	exec 4>&-
else
	echo "FAIL: the other-layout target"
	failed=$((failed + 1))
fi

if start_target 5 other-table; then
	timeout 20 "$hz" stats "$pid" >"$tmp/table" 2>&1
	check "another version's counters: exit status 1" [ $? = 1 ]
	check "another version's counters: names both versions" \
		grep -q "process $pid runs hugezero 9.8.7, whose counters differ from" "$tmp/table"
	exec 5>&-
else
	echo "FAIL: the other-table target"
	failed=$((failed + 1))
fi

sleep 30 &
plain=$!
pids+=("$plain")
"$hz" stats "$plain" >"$tmp/plain" 2>&1
check "a process without hugezero: exit status 1" [ $? = 1 ]
check "a process without hugezero: says so" \
	grep -q "process $plain does not run hugezero" "$tmp/plain"

max=$(cat /proc/sys/kernel/pid_max)
free=$((max - 1))
while [ -e "/proc/$free" ]; do free=$((free - 1)); done
"$hz" stats "$free" >"$tmp/nopid" 2>&1
check "a pid that does not exist: exit status 1" [ $? = 1 ]
check "a pid that does not exist: says so" grep -qx "hugezero stats: no process $free" "$tmp/nopid"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
