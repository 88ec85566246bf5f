#!/bin/bash
# hugezero run --record FILE and hugezero plot: a real run of record_target
# (32 MiB blocks recycled for about a second) recorded, checked against the
# program's own exit report, and drawn; the exit status passed through (a
# status, a signal death, signals sent to hugezero); the errors a user can
# hit, each with its message and exit status.
# usage: record.sh HUGEZERO_BIN RECORD_TARGET_BIN
# shellcheck disable=SC2016 # awk programs and sh -c scripts, quoted for them
set -uo pipefail
hz=$1
target=$2
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../check.sh"

header=$'elapsed_s\tlive_bytes\tcache_bytes\tnew_hugetlb_bytes\tnew_thp_bytes\tnew_4k_bytes\tzeroed_by_thread_bytes\tzeroed_by_calloc_bytes\tcache_hits\tcache_misses\tthp_promoted\tpromote_collapsed_bytes'

check "run --help documents --record" bash -c "'$hz' run --help | grep -q -- '--record FILE'"
check "plot --help exits 0 and names gnuplot-nox" \
	bash -c "'$hz' plot --help | grep -q gnuplot-nox"

# ---- a real run ----
HUGEZERO_STATS_FILE=$tmp/exit.json timeout 60 "$hz" run --record "$tmp/run.tsv" "$target" 1 \
	2>"$tmp/run.err"
check "run --record of a program that exits 0 exits 0" [ $? = 0 ]
check "the recording starts with its header line" [ "$(head -n 1 "$tmp/run.tsv")" = "$header" ]
rows=$(($(wc -l <"$tmp/run.tsv") - 1))
check "the recording has at least 3 rows ($rows)" [ "$rows" -ge 3 ]
check "every row has 12 fields" \
	awk -F'\t' 'NF != 12 { exit 1 }' "$tmp/run.tsv"
check "elapsed seconds increase from row to row" \
	awk -F'\t' 'NR > 2 && $1 <= prev { exit 1 } { prev = $1 }' "$tmp/run.tsv"
# Columns 4-12 count since the start; live (2) and cache (3) are gauges.
check "the counters never decrease (all but live and cache)" \
	awk -F'\t' 'NR > 2 { for (i = 4; i <= 12; i++) if ($i + 0 < prev[i] + 0) exit 1 }
		{ for (i = 4; i <= 12; i++) prev[i] = $i }' "$tmp/run.tsv"
last_hits=$(tail -n 1 "$tmp/run.tsv" | cut -f 9)
exit_hits=$(grep -o '"cache_hits": [0-9]*' "$tmp/exit.json" | grep -o '[0-9]*$')
check "the last row counts reused blocks ($last_hits)" [ "${last_hits:-0}" -gt 0 ]
check "... no more than the program's exit report ($exit_hits)" \
	[ "${last_hits:-1}" -le "${exit_hits:-0}" ]
check "the last row counts large blocks mapped" \
	awk -F'\t' 'END { exit !($4 + $5 + $6 > 0) }' "$tmp/run.tsv"
check "a readable run leaves nothing on stderr" [ ! -s "$tmp/run.err" ]

# ---- the picture ----
if ! command -v gnuplot >/dev/null; then
	echo "SKIP: hugezero plot draws nothing here: gnuplot is not installed (Debian: gnuplot-nox)"
else
	"$hz" plot "$tmp/run.tsv" -o "$tmp/run.png" 2>"$tmp/plot.err"
	check "plot exits 0" [ $? = 0 ]
	check "plot writes a PNG (its magic bytes)" \
		bash -c "[ \"\$(head -c 8 '$tmp/run.png' | od -An -tx1 | tr -d ' \n')\" = 89504e470d0a1a0a ]"
	# Only gnuplot's own warnings: a font library may complain of its cache.
	check "gnuplot printed no warning (a column name or script error)" \
		bash -c "! grep -qi warning '$tmp/plot.err'"
	rm -f "$tmp/run.png"
	"$hz" plot "$tmp/run.tsv" >/dev/null 2>&1
	check "plot without -o writes FILE with .png for its extension" [ -s "$tmp/run.png" ]
	# gnuplot reads the names inside its own quotes: a quote in them is doubled.
	cp "$tmp/run.tsv" "$tmp/it's a run.tsv"
	check "plot -t TITLE, file names with a quote and spaces" \
		"$hz" plot "$tmp/it's a run.tsv" -o "$tmp/it's a run.png" -t "record_target's run"
	check "... writes that PNG" [ -s "$tmp/it's a run.png" ]
fi

# ---- exit status, as run's ----
check "run --record passes the exit status through (3)" \
	[ "$(status_of "$hz" run --record "$tmp/s.tsv" -- sh -c 'exit 3')" = 3 ]
check "a child killed by SIGTERM: 128 + 15" \
	[ "$(status_of "$hz" run --record "$tmp/s.tsv" sh -c 'kill -TERM $$')" = 143 ]
check "a child killed by SIGSEGV: 128 + 11, as a shell reports it" \
	[ "$(status_of "$hz" run --record "$tmp/s.tsv" sh -c 'kill -SEGV $$')" = 139 ]
for sig in TERM USR1; do
	"$hz" run --record "$tmp/sig.tsv" sleep 30 &
	runner=$!
	sleep 0.5
	kill -"$sig" "$runner"
	wait "$runner"
	got=$?
	want=$((128 + $(kill -l "$sig")))
	check "SIG$sig sent to hugezero goes on to the child, which dies of it ($got, want $want)" \
		[ "$got" = "$want" ]
done
check "... and the recording has rows from before" [ "$(wc -l <"$tmp/sig.tsv")" -ge 3 ]
check "run --record of a missing command exits 127, as run" \
	[ "$(status_of "$hz" run --record "$tmp/s.tsv" no-such-command-xyz)" = 127 ]
check "run --record of something not executable exits 126, as run" \
	[ "$(status_of "$hz" run --record "$tmp/s.tsv" /tmp)" = 126 ]

# ---- errors ----
check "--record without FILE is a usage error (2)" \
	bash -c "[ \"\$('$hz' run --record 2>&1 >/dev/null; echo \$?)\" = \"\$(printf 'hugezero run: --record needs a FILE\\n2')\" ]"
check "--record followed by an option is a usage error (2)" \
	[ "$(status_of "$hz" run --record --stats true)" = 2 ]
"$hz" run --record "$tmp/no/such/dir.tsv" sh -c "touch '$tmp/ran'" 2>"$tmp/unwritable"
check "an unwritable FILE: exit status 1" [ $? = 1 ]
check "... says which file and why" \
	grep -qx "hugezero run: --record $tmp/no/such/dir.tsv: No such file or directory" \
	"$tmp/unwritable"
check "... and runs nothing" [ ! -e "$tmp/ran" ]
HUGEZERO_DISABLE=1 "$hz" run --record "$tmp/none.tsv" "$target" 0.3 2>"$tmp/none.err"
check "a program never readable: the command's exit status (0)" [ $? = 0 ]
check "... FILE has its header only" [ "$(cat "$tmp/none.tsv")" = "$header" ]
check "... and stderr says so" grep -q "no sample of $target: no hugezero counters" \
	"$tmp/none.err"

check "plot without FILE is a usage error (2)" [ "$(status_of "$hz" plot)" = 2 ]
check "plot with an unknown option is a usage error (2)" \
	[ "$(status_of "$hz" plot --frob "$tmp/run.tsv")" = 2 ]
"$hz" plot "$tmp/missing.tsv" -o "$tmp/x.png" 2>"$tmp/plot-missing"
check "plot of a missing FILE: exit status 1, naming it" \
	bash -c "[ $? = 1 ] && grep -qx 'hugezero plot: $tmp/missing.tsv: No such file or directory' '$tmp/plot-missing'"
printf 'a,b,c\n1,2,3\n' >"$tmp/other.csv"
"$hz" plot "$tmp/other.csv" -o "$tmp/x.png" 2>"$tmp/plot-other"
check "plot of another file: exit status 1, the header named" \
	bash -c "[ $? = 1 ] && grep -q 'other.csv, line 1: not what .hugezero run --record. writes (its header line differs)' '$tmp/plot-other'"
{ head -n 3 "$tmp/run.tsv"; printf '1.5\t12\tgarbage\n'; } >"$tmp/garbled.tsv"
"$hz" plot "$tmp/garbled.tsv" -o "$tmp/x.png" 2>"$tmp/plot-garbled"
check "plot of a garbled row: exit status 1, the line named" \
	bash -c "[ $? = 1 ] && grep -q 'garbled.tsv, line 4: not what' '$tmp/plot-garbled'"
"$hz" plot "$tmp/none.tsv" -o "$tmp/x.png" 2>"$tmp/plot-empty"
check "plot of a header-only recording: exit status 1, no samples" \
	bash -c "[ $? = 1 ] && grep -q 'none.tsv has no samples' '$tmp/plot-empty'"
PATH=/nonexistent "$hz" plot "$tmp/run.tsv" -o "$tmp/x.png" 2>"$tmp/plot-nognuplot"
check "plot without gnuplot on PATH: exit status 1, naming the package" \
	bash -c "[ $? = 1 ] && grep -q 'gnuplot is not on PATH; install it (Debian, Ubuntu: apt-get install gnuplot-nox)' '$tmp/plot-nognuplot'"
check "... and no PNG" [ ! -e "$tmp/x.png" ]

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
