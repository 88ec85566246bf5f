#!/bin/bash
# Every program of the given directories run with --version (stdin
# /dev/null, a fresh HOME, as nobody when root, so that no program can
# change the machine) under libhugezero-preload.so, and under glibc
# alone when it did not exit 0 there: the exit statuses must match. A
# program that exits 0 under the preload was not broken by it, and is
# not run again. A program that times out under glibc too (it ignores
# --version and waits) proves nothing and is passed over. A pair that
# differs is run again once with a timeout ten times as long: a program
# may differ from itself between runs (cpan writes its configuration at
# the first), and one that takes 2-3 s (a Python tool starting 80
# threads) crosses the short timeout now and then on a busy machine
# under either library; a hang stays a hang. What the preload's run of a
# differing pair printed is shown.
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

# Every run gets an empty HOME: one directory, emptied after each run
# (cpan writes its configuration there at its first run).
home=$work/home
mkdir "$home"
chmod 777 "$home"
home_entries() { # into left: what is in $home, hidden files too
	shopt -s nullglob dotglob
	left=("$home"/*)
	shopt -u nullglob dotglob
}

# A run ends when its process group is gone, not only its first process:
# timeout(1) makes the group and signals all of it, but returns when the
# program's script has died, while the JVM it started (mvnDebug) may still
# hold the port the next run listens on. Up to 5 s, then killed. The
# status is left in $ran, not printed: a subshell per run cost as much as
# a short program's run.
status() { # seconds, env...: one run of $prog --version
	local seconds=$1 group left
	shift
	(cd "$home" && exec timeout -k 1 "$seconds" "${as_user[@]}" env HOME="$home" "$@" \
		"$prog" --version </dev/null >"$work/output" 2>&1) 2>/dev/null &
	group=$!
	wait $group 2>/dev/null # bash would print "Killed" for a run ended by -k
	ran=$?
	for _ in {1..50}; do
		kill -0 -- "-$group" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$group" 2>/dev/null
	home_entries
	[ ${#left[@]} -eq 0 ] && return
	rm -rf -- "${left[@]}" 2>/dev/null
	home_entries
	if [ ${#left[@]} -gt 0 ]; then # what the program locked itself out of stays
		home=$(mktemp -d "$work/home.XXXXXX")
		chmod 777 "$home"
	fi
}

pair() { # seconds: glibc's status in $g, the preload's in $h; g is 0 when h is
	status "$1" LD_PRELOAD="$preload"
	h=$ran g=0
	[ "$h" = 0 ] && return
	mv "$work/output" "$work/output.hugezero"
	status "$1"
	g=$ran
}

total=0
differ=0
for dir in "$@"; do
	for prog in "$dir"/*; do
		[ -f "$prog" ] && [ -x "$prog" ] || continue
		case "$skip" in *" ${prog##*/} "*) continue ;; esac
		pair "$timeout_s"
		[ "$g" = 124 ] && continue
		total=$((total + 1))
		[ "$g" = "$h" ] && continue
		g1=$g h1=$h
		pair "$((timeout_s * 10))"
		{ [ "$g" = 124 ] || [ "$g" = "$h" ]; } && continue
		echo "DIFFER $prog --version: glibc exit $g1 then $g, hugezero exit $h1 then $h" \
			"(124: timeout after ${timeout_s} s, then $((timeout_s * 10)) s); its last output under hugezero:"
		tail -n 20 "$work/output.hugezero" | sed 's/^/  | /'
		differ=$((differ + 1))
	done
done
if [ $total -eq 0 ]; then
	echo "SKIP: no program to run in $*"
	exit 77
fi
echo "$((total - differ)) passed, $differ failed"
[ $differ -eq 0 ]
