#!/bin/bash
# Every program of the given directories run with --version (stdin
# /dev/null, a fresh HOME, as nobody when root, so that no program can
# change the machine), once under glibc and once under
# libhugezero-preload.so: the exit statuses must match. A program that
# times out under glibc too (it ignores --version and waits) proves
# nothing and is passed over, and a pair that differs is run again once,
# so a program that differs from itself between runs (cpan writes its
# configuration at the first) is not counted as ours. Programs in
# SKIP_PROGRAMS (names, space-separated) are not run.
#
# usage: version_sweep.sh PRELOAD_SO DIR...
# VERSION_SWEEP_TIMEOUT: seconds a run may take (default 3).
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

status() { # env...: the status of one run of $prog --version
	local home
	home=$(mktemp -d "$work/home.XXXXXX")
	chmod 777 "$home"
	(cd "$home" && timeout -k 1 "$timeout_s" "${as_user[@]}" env HOME="$home" "$@" \
		"$prog" --version </dev/null >/dev/null 2>&1) 2>/dev/null
	echo $?
	rm -rf "$home"
}

pair() { # -> "glibc-status preload-status", the second left out after a glibc timeout
	local g
	g=$(status)
	[ "$g" = 124 ] && { echo 124; return; }
	echo "$g $(status LD_PRELOAD="$preload")"
}

total=0
differ=0
for dir in "$@"; do
	for prog in "$dir"/*; do
		[ -f "$prog" ] && [ -x "$prog" ] || continue
		case "$skip" in *" ${prog##*/} "*) continue ;; esac
		read -r g h < <(pair)
		[ "$g" = 124 ] && continue
		total=$((total + 1))
		[ "$g" = "$h" ] && continue
		read -r g2 h2 < <(pair)
		{ [ "$g2" = 124 ] || [ "$g2" = "$h2" ]; } && continue
		echo "DIFFER $prog --version: glibc exit $g then $g2, hugezero exit $h then $h2 (124: timeout)"
		differ=$((differ + 1))
	done
done
if [ $total -eq 0 ]; then
	echo "SKIP: no program to run in $*"
	exit 77
fi
echo "$((total - differ)) passed, $differ failed"
[ $differ -eq 0 ]
