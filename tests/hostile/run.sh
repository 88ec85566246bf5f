#!/bin/bash
# Run one hostile case twice, under glibc and under libhugezero-preload.so
# (default options), and compare the outcomes: exit status or signal,
# stdout (the case's printed result) and stderr (a host program's stderr is
# not ours to write to). Protocol of a case: hostile.h.
#
# usage: run.sh PRELOAD_SO COMMAND [ARGS...]
# HOSTILE_TIMEOUT: seconds per run (default 60); a run that takes longer
# is killed and its outcome is "timeout".
#
# Exit: 0 when the outcomes match, 1 when they differ or the glibc run
# fails (then the case's assertions are wrong), 77 when the case skips.
set -uo pipefail
preload=$(realpath "$1")
shift
timeout_s=${HOSTILE_TIMEOUT:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# No core files from a run that crashes; glibc's MALLOC_PERTURB_ (meson
# sets it) would change glibc's behaviour on one side only for small
# blocks and cost minutes on large ones: both runs use the defaults.
ulimit -c 0
unset MALLOC_PERTURB_ MALLOC_CHECK_

# The preload must really load, or the comparison proves nothing.
maps=$(LD_PRELOAD="$preload" cat /proc/self/maps)
if [[ $maps != *libhugezero-preload* ]]; then
	echo "FAIL: $preload does not load under LD_PRELOAD"
	exit 1
fi

outcome() { # exit status of timeout(1) -> text
	local st=$1
	if [ "$st" -eq 124 ]; then
		echo "timeout after ${timeout_s}s"
	elif [ "$st" -gt 128 ]; then
		echo "signal SIG$(kill -l $((st - 128)))"
	else
		echo "exit $st"
	fi
}

# side NAME [VAR=VALUE...]: run the case with that environment.
side() {
	local name=$1
	shift
	timeout -k 5 "$timeout_s" env "$@" "${cmd[@]}" \
		>"$work/$name.out" 2>"$work/$name.err" </dev/null
	outcome $?
}

show() { # name: what the run printed
	sed "s/^/  $1 stdout| /" "$work/$1.out"
	sed "s/^/  $1 stderr| /" "$work/$1.err"
}

cmd=("$@")
glibc=$(side glibc)
# "[  SKIP    ]": the form scripts/test collects reasons in.
skip() { # side
	local why
	why=$(grep -m1 '^SKIP: ' "$work/$1.out" | sed 's/^SKIP: //')
	echo "[  SKIP    ] ${cmd[*]:0:2}${2:-}: ${why:-no reason given}"
	exit 77
}
if [ "$glibc" = "exit 77" ]; then
	skip glibc
fi
if [ "$glibc" != "exit 0" ]; then
	echo "FAIL: under glibc the case gives '$glibc', not exit 0: its checks are wrong"
	show glibc
	exit 1
fi

# The glibc run's measurements, for the preload run's own comparison.
baselines=()
while read -r _ name value; do
	baselines+=("HOSTILE_BASELINE_$name=$value")
done < <(grep '^baseline ' "$work/glibc.out")
hugezero=$(side hugezero "${baselines[@]}" LD_PRELOAD="$preload")

# The machine changed between the runs (another process took the free
# huge pages a case needs): nothing to compare. Any other skip in the
# preload run only is a difference: something the program could do under
# glibc failed.
if [ "$hugezero" = "exit 77" ] && grep -q '^SKIP: environment changed: ' "$work/hugezero.out"; then
	skip hugezero " (in the preload run only)"
fi

strip() { # file, pattern of lines that are not compared
	grep -v "$2" "$1" >"$1.cmp" || true
}
for s in glibc hugezero; do
	strip "$work/$s.out" '^baseline '
	strip "$work/$s.err" '^note: '
done
same=yes
[ "$glibc" = "$hugezero" ] || same=no
cmp -s "$work/glibc.out.cmp" "$work/hugezero.out.cmp" || same=no
cmp -s "$work/glibc.err.cmp" "$work/hugezero.err.cmp" || same=no

echo "glibc:    $glibc"
echo "hugezero: $hugezero"
if [ "$same" = yes ]; then
	echo "MATCH"
	show glibc
	show hugezero
	exit 0
fi
echo "DIFFER"
show glibc
show hugezero
exit 1
