#!/bin/bash
# Programs whose libraries make the process's first allocation inside a
# locale call (libgpg-error's bindtextdomain, p11-kit's newlocale), each run
# with --version under glibc and under libhugezero-preload.so: the exit
# status and stdout must match, within a timeout (they hung under the
# preload until start-up stopped calling dlerror()). A program that is not
# installed is skipped with its name; none installed skips the test.
#
# usage: startup_programs.sh PRELOAD_SO
set -uo pipefail
preload=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pg=/usr/lib/postgresql/15/bin
programs=("$pg/postgres" "$pg/initdb" "$pg/pg_dump" "$pg/createdb" psql curl wget gpg
	gpgconf ps free uptime pgrep pmap logger lslogins)
ran=0
failed=0
unset MALLOC_PERTURB_ MALLOC_CHECK_

run() { # out-file, env..., program: its status ("timeout" past 10 s)
	local out=$1
	shift
	timeout -k 2 10 env "$@" --version </dev/null >"$out" 2>"$out.err"
	local st=$?
	[ $st -eq 124 ] && echo timeout || echo "exit $st"
}

for p in "${programs[@]}"; do
	path=$(command -v "$p") || { echo "[  SKIP    ] $p: not installed"; continue; }
	g=$(run "$work/g" "$path")
	h=$(run "$work/h" LD_PRELOAD="$preload" "$path")
	ran=$((ran + 1))
	if [ "$g" != "$h" ] || ! cmp -s "$work/g" "$work/h"; then
		echo "FAIL $p --version: glibc $g, hugezero $h"
		diff "$work/g" "$work/h" | head -5
		sed 's/^/  hugezero stderr| /' "$work/h.err" | head -5
		failed=$((failed + 1))
	else
		echo "ok   $p --version: $g under both"
	fi
done
if [ $ran -eq 0 ]; then
	echo "SKIP: none of the programs is installed"
	exit 77
fi
echo "$((ran - failed)) passed, $failed failed"
[ $failed -eq 0 ]
