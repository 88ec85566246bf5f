#!/bin/bash
# Real programs under LD_PRELOAD=libhugezero-preload.so: output identical to
# a run without it, large blocks served by hugezero (its JSON stats; for the
# jemalloc program, extents from hugezero's hooks on its arena), and peak
# RSS recorded next to glibc's.
#
# usage: real_programs.sh PRELOAD_SO [WITH_JEMALLOC_EXE]
set -euo pipefail
preload=$(realpath "$1")
with_jemalloc=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passed=0
python=/usr/bin/python3

# run NAME CMD...: run CMD twice (glibc, then hugezero) and compare stdout.
run() {
	local name=$1
	shift
	/usr/bin/time -f %M -o "$work/rss.glibc" "$@" >"$work/out.glibc"
	HUGEZERO_STATS_FILE="$work/stats.%p.json" LD_PRELOAD="$preload" \
		/usr/bin/time -f %M -o "$work/rss.hz" "$@" >"$work/out.hz"
	local served hooked
	# One stats file per process (the shell and time(1) are preloaded too).
	served=$(cat "$work"/stats.*.json | grep -o '"large_requests": [0-9]*' |
		awk '{ n += $2 } END { print n + 0 }')
	# Extents the jemalloc hooks handed out: a jemalloc program's large
	# requests are served through its own arena with hugezero's hooks.
	hooked=$(cat "$work"/stats.*.json | grep -o '"extents": [0-9]*' |
		awk '{ n += $2 } END { print n + 0 }')
	# Every stats file is valid JSON with the exec section.
	local bad_json
	bad_json=$("$python" -c 'import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    assert d["exec"]["mode"] in ("off", "advise", "remap"), f' "$work"/stats.*.json 2>&1)
	local rss_g rss_h
	rss_g=$(tail -1 "$work/rss.glibc")
	rss_h=$(tail -1 "$work/rss.hz")
	if ! cmp -s "$work/out.glibc" "$work/out.hz"; then
		echo "FAIL $name: output differs under hugezero"
		failures=$((failures + 1))
	elif [ -n "$bad_json" ]; then
		echo "FAIL $name: a stats file is not the JSON expected: $bad_json"
		failures=$((failures + 1))
	elif [ "$served" -eq 0 ]; then
		echo "FAIL $name: hugezero served no large request"
		failures=$((failures + 1))
	elif [ "${need_hooks:-0}" = 1 ] && [ "$hooked" -eq 0 ]; then
		echo "FAIL $name: no extent came from hugezero's jemalloc hooks"
		failures=$((failures + 1))
	else
		echo "ok   $name: $served large requests, $hooked hooked extents;" \
			"peak RSS glibc ${rss_g} KiB, hugezero ${rss_h} KiB"
		passed=$((passed + 1))
	fi
	rm -f "$work"/stats.*.json
}

head -c 12M /dev/urandom | od -An -tx8 -w16 >"$work/lines"
head -c 8M /dev/urandom >"$work/random"
cat "$work/random" "$work/random" >"$work/repeated"

run numpy "$python" -c '
import numpy as np, hashlib
acc = hashlib.sha256()
for i in range(20):
    a = np.zeros(4 << 20)
    b = np.ones_like(a) * i
    a += b
    acc.update(a.tobytes()[:4096]); acc.update(str(a.sum()).encode())
big = np.zeros((4096, 4096), dtype=np.float32); big[::7, ::3] = 1.5
acc.update(str(big.sum()).encode())
print(acc.hexdigest())'
run sort sort -S 1G "$work/lines"
run xz bash -c "xz -9 -T1 -c '$work/random' | sha256sum"
run zstd bash -c "zstd -q --long=31 -T1 -c '$work/repeated' | sha256sum"
if [ -n "$with_jemalloc" ]; then
	need_hooks=1 run with_jemalloc "$with_jemalloc"
else
	echo "SKIP with_jemalloc: meson found no jemalloc (apt-get install libjemalloc-dev)"
fi

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
