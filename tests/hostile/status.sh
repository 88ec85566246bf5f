#!/bin/bash
# Run every hostile case, registered and known broken, and print the
# STATUS.md table: case, glibc's outcome, the preload's, match or not. A
# known-broken case that now matches is marked: its name can leave
# hostile_known_broken in meson.build.
#
# usage: status.sh BUILD_DIR   (after ninja -C BUILD_DIR)
set -uo pipefail
here=$(dirname "$(realpath "$0")")
cases=$1/tests/hostile/hostile_cases.sh
[ -r "$cases" ] || { echo "no $cases: configure and build $1 first"; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "| case | glibc | hugezero today | match | in meson.build |"
echo "|---|---|---|---|---|"

hostile_case() { # name registered|broken command...
	local name=$1 state=$2 glibc hz verdict
	shift 2
	HOSTILE_TIMEOUT=${HOSTILE_TIMEOUT:-150} bash "$here/run.sh" "$hostile_preload" "$@" >"$out" 2>&1
	case $? in
	0) verdict=yes ;;
	77) verdict="skipped: $(grep -m1 'SKIP' "$out" | sed 's/^[^]]*\] [^:]*: //')" ;;
	*) verdict=**no** ;;
	esac
	glibc=$(sed -n 's/^glibc: *//p' "$out")
	hz=$(sed -n 's/^hugezero: *//p' "$out")
	# What the preload run said that glibc's did not: its first failed
	# check or message, shortened.
	local why
	why=$(grep -m1 -E '^  hugezero (stderr|stdout)\| ' "$out" | sed 's/^  hugezero [a-z]*| //' |
		sed 's/^[a-z_]*\.c:[0-9]*: check failed: [^:]*: //' | cut -c1-90 | sed 's/|/\\|/g')
	[ "$verdict" = yes ] && why=""
	[ -n "$why" ] && hz="$hz: $why"
	if [ "$state" = broken ] && [ "$verdict" = yes ]; then
		state="known broken, NOW MATCHES"
	elif [ "$state" = broken ]; then
		state="known broken"
	fi
	echo "| \`$name\` | ${glibc:--} | ${hz:--} | $verdict | $state |"
}

# shellcheck source=/dev/null
. "$cases"
