#!/bin/bash
# Run every hostile case, registered and known broken, and print the
# STATUS.md table: case, glibc's outcome, the preload's, match or not. A
# known-broken case that now matches is marked: its name can leave
# hostile_known_broken in meson.build.
#
# usage: status.sh BUILD_DIR [PATTERN]   (after ninja -C BUILD_DIR)
# PATTERN (an extended regular expression) picks cases by name.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
cases=$1/tests/hostile/hostile_cases.sh
pattern=${2:-.}
[ -r "$cases" ] || { echo "no $cases: configure and build $1 first"; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "| case | glibc | hugezero today | match | in meson.build |"
echo "|---|---|---|---|---|"

hostile_case() { # name registered|broken command...
	local name=$1 state=$2 glibc hz verdict
	shift 2
	[[ $name =~ $pattern ]] || return 0
	# hostile_preload: set by the cases file.
	# shellcheck disable=SC2154
	HOSTILE_TIMEOUT=${HOSTILE_TIMEOUT:-150} bash "$here/run.sh" "$hostile_preload" "$@" >"$out" 2>&1
	case $? in
	0) verdict=yes ;;
	77) verdict="skipped: $(grep -m1 'SKIP' "$out" | sed 's/^[^]]*\] [^:(]*//; s/^: //')" ;;
	*) verdict="**no**" ;;
	esac
	glibc=$(sed -n 's/^glibc: *//p' "$out")
	hz=$(sed -n 's/^hugezero: *//p' "$out")
	# What the preload run said that glibc's did not: its first failed
	# check or message, shortened.
	local why
	why=$( (grep -E '^  hugezero stderr\| ' "$out" | grep -v '| note: '
		grep -E '^  hugezero stdout\| ' "$out") | head -1 | sed 's/^  hugezero [a-z]*| //' |
		sed 's/^.*\.c:[0-9]*: check failed: [^:]*: //' | cut -c1-100 | sed 's/|/\\|/g')
	# A Python traceback says what happened on its last line.
	if [ "$why" = "Traceback (most recent call last):" ]; then
		why=$(grep -E '^  hugezero stderr\| ' "$out" | tail -1 | sed 's/^  hugezero [a-z]*| //')
	fi
	[ "$verdict" = yes ] && why=""
	# Outcomes alike, results not: show glibc's result beside ours.
	if [ -n "$why" ] && [ "$glibc" = "$hz" ]; then
		glibc="$glibc: $(sed -n 's/^  glibc stdout| //p' "$out" | grep -v '^baseline' | head -1)"
	fi
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
