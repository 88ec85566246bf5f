#!/bin/bash
# Every program of the given directories run with --version (stdin
# /dev/null, a fresh HOME, as nobody when root, so that no program can
# change the machine), once under glibc and once under
# libhugezero-preload.so: the exit statuses must match. A program that
# times out under glibc too (it ignores --version and waits) proves
# nothing and is passed over. A pair that differs is run again once with
# a timeout ten times as long: a program may differ from itself between
# runs (cpan writes its configuration at the first), and one that takes
# 2-3 s (a Python tool starting 80 threads) crosses the short timeout
# now and then on a busy machine under either library; a hang stays a
# hang. What the preload's run of a differing pair printed is shown.
# Programs in SKIP_PROGRAMS (names, space-separated) are not run.
#
# usage: version_sweep.sh PRELOAD_SO DIR...
# VERSION_SWEEP_TIMEOUT: seconds a run may take (default 3; ten times
# that when a differing pair is run again).
set -uo pipefail
preload=$(realpath "$1")
shift
timeout_s=${VERSION_SWEEP_TIMEOUT:-3}
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
unset MALLOC_PERTURB_ MALLOC_CHECK_
# Programs that do more than print their version whatever they are given.
skip=" ${SKIP_PROGRAMS:-} "

as_user=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
fi

status() { # seconds, env...: the status of one run of $prog --version
	local home seconds=$1
	shift
	home=$(mktemp -d "$work/home.XXXXXX")
	chmod 777 "$home"
	(cd "$home" && timeout -k 1 "$seconds" "${as_user[@]}" env HOME="$home" "$@" \
		"$prog" --version </dev/null >"$work/output" 2>&1) 2>/dev/null
	echo $?
	rm -rf "$home"
}

pair() { # seconds -> "glibc-status preload-status", the second left out after a glibc timeout
	local g
	g=$(status "$1")
	[ "$g" = 124 ] && { echo 124; return; }
	echo "$g $(status "$1" LD_PRELOAD="$preload")"
}

total=0
differ=0
for dir in "$@"; do
	for prog in "$dir"/*; do
		[ -f "$prog" ] && [ -x "$prog" ] || continue
		case "$skip" in *" ${prog##*/} "*) continue ;; esac
		read -r g h < <(pair "$timeout_s")
		[ "$g" = 124 ] && continue
		total=$((total + 1))
		[ "$g" = "$h" ] && continue
		read -r g2 h2 < <(pair "$((timeout_s * 10))")
		{ [ "$g2" = 124 ] || [ "$g2" = "$h2" ]; } && continue
		echo "DIFFER $prog --version: glibc exit $g then $g2, hugezero exit $h then $h2" \
			"(124: timeout after ${timeout_s} s, then $((timeout_s * 10)) s); its last output under hugezero:"
		tail -n 20 "$work/output" | sed 's/^/  | /'
		differ=$((differ + 1))
	done
done
if [ $total -eq 0 ]; then
	echo "SKIP: no program to run in $*"
	exit 77
fi
echo "$((total - differ)) passed, $differ failed"
[ $differ -eq 0 ]
