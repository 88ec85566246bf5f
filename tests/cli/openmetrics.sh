#!/bin/bash
# hugezero stats --openmetrics and --textfile: two real processes under the
# preload (one with quotes, a backslash and a cut UTF-8 character in its
# comm), stopped while read so that every value agrees with their --json
# reports, parsed by prometheus_client's own parsers (metrics_check.py);
# the textfile written atomically, its errors, and the systemd example's
# ExecStart run as written.
# usage: openmetrics.sh HUGEZERO_BIN STATS_TARGET_BIN SOURCE_ROOT HUGEZERO_1
set -uo pipefail
hz=$1
target=$2
src=$3
man_page=$4
passed=0
failed=0
tmp=$(mktemp -d)
pids=()
py=/usr/bin/python3
checker=$src/tests/cli/metrics_check.py
units=$src/examples/systemd

cleanup() {
	exec 3>&- 4>&- 2>/dev/null
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../check.sh"

if ! "$py" -c 'import prometheus_client.openmetrics.parser, prometheus_client.parser' 2>/dev/null; then
	echo "SKIP: $py cannot import prometheus_client (apt-get install python3-prometheus-client)"
	exit 77
fi

# A check whose command's output is shown when it fails.
check_shown() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		passed=$((passed + 1))
	else
		echo "FAIL: $what"
		echo "$out" | head -40
		failed=$((failed + 1))
	fi
}

# Starts BINARY [ARG] under the preload on fd $1's fifo; sets $pid once it
# printed "ready" (it waits until that fd closes).
start_target() {
	local fd=$1 bin=$2 arg=${3:-}
	mkfifo "$tmp/ctl$fd"
	"$hz" run "$bin" ${arg:+"$arg"} <"$tmp/ctl$fd" >"$tmp/ready$fd" 2>"$tmp/err$fd" &
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

check "stats --help documents --openmetrics and --textfile DIR" \
	bash -c "'$hz' stats --help | grep -q -- '--openmetrics' && '$hz' stats --help | grep -q -- '--textfile DIR'"
check "--openmetrics with --json is a usage error (2)" \
	[ "$(status_of "$hz" stats --openmetrics --json 1)" = 2 ]
check "--openmetrics with --textfile is a usage error (2)" \
	[ "$(status_of "$hz" stats --openmetrics --textfile "$tmp")" = 2 ]
check "--textfile without DIR is a usage error (2)" [ "$(status_of "$hz" stats --textfile)" = 2 ]

# The second target's comm: a quote and a backslash to escape, and a cut
# at 15 bytes through "é", which leaves a byte that is not UTF-8 ('?'). Its
# calloc clears a reused block itself: a time in seconds that is not 0.
odd_name='a"b\cdefghijklé'
odd_comm='a"b\cdefghijkl?'
cp "$target" "$tmp/$odd_name"
if ! start_target 3 "$target" ||
	! HUGEZERO_PREZERO=sync start_target 4 "$tmp/$odd_name" cleared; then
	echo "FAIL: the target processes under the preload"
	exit 1
fi
a=${pids[0]}
b=${pids[1]}
version=$("$hz" --version | awk '{print $2}')

# Stopped: no counter moves (the pre-zero thread included) between reads.
kill -STOP "$a" "$b"
"$hz" stats --json "$a" >"$tmp/a.json" && "$hz" stats --json "$b" >"$tmp/b.json"
check "--json of both targets while stopped" [ $? = 0 ]
check "the second target's calloc took time (clear_ns is not 0)" \
	grep -Eq '"clear_ns": [1-9]' "$tmp/b.json"
"$hz" stats --openmetrics "$a" >"$tmp/a.om" 2>"$tmp/a.err"
check "--openmetrics PID exits 0, nothing on stderr" \
	bash -c "[ $? = 0 ] && [ ! -s '$tmp/a.err' ]"
"$hz" stats --openmetrics >"$tmp/all.om" 2>"$tmp/all.err"
check "--openmetrics without a PID exits 0 and skips the unreadable silently" \
	bash -c "[ $? = 0 ] && [ ! -s '$tmp/all.err' ]"
mkdir "$tmp/pid" "$tmp/node-exporter"
"$hz" stats --textfile "$tmp/pid" "$a" 2>"$tmp/pid.err"
check "--textfile DIR PID exits 0" [ $? = 0 ]

# The example service's command, as written but for the binary and DIR.
exec_start=$(sed -n 's/^ExecStart=//p' "$units/hugezero-textfile.service")
rw_dir=$(sed -n 's/^ReadWritePaths=-\{0,1\}//p' "$units/hugezero-textfile.service")
read -r -a argv <<<"$exec_start"
runs_textfile() {
	[ "${argv[0]##*/}" = hugezero ] && [ "${argv[1]}" = stats ] &&
		[ "${argv[2]}" = --textfile ] && [ "${argv[3]}" = "$rw_dir" ] && [ ${#argv[@]} = 4 ]
}
check "the service's ExecStart runs hugezero stats --textfile into its ReadWritePaths" \
	runs_textfile
argv[0]=$hz
argv[3]=$tmp/node-exporter
"${argv[@]}" 2>"$tmp/service.err"
check "the service's ExecStart exits 0, nothing on stderr" \
	bash -c "[ $? = 0 ] && [ ! -s '$tmp/service.err' ]"
inode=$(stat -c %i "$tmp/node-exporter/hugezero.prom")
cp "$tmp/node-exporter/hugezero.prom" "$tmp/first.prom"
"${argv[@]}"
ours() { grep -E "pid=\"($a|$b)\"" "$1"; }
replaced() {
	[ "$(stat -c %i "$tmp/node-exporter/hugezero.prom")" != "$inode" ] &&
		[ -n "$(ours "$tmp/first.prom")" ] &&
		[ "$(ours "$tmp/first.prom")" = "$(ours "$tmp/node-exporter/hugezero.prom")" ]
}
kill -CONT "$a" "$b"

specs=("$a:$tmp/a.json:stats_target" "$b:$tmp/b.json:$odd_comm")
check_shown "--openmetrics PID: the OpenMetrics parser reads exactly stats.def's families, the JSON's values" \
	"$py" "$checker" openmetrics "$tmp/a.om" "$src/src/stats.def" "$version" only "${specs[0]}"
check_shown "--openmetrics: both targets, escaped comm, among any others" \
	"$py" "$checker" openmetrics "$tmp/all.om" "$src/src/stats.def" "$version" among "${specs[@]}"
check_shown "--textfile DIR PID: the Prometheus 0.0.4 parser, exactly that process" \
	"$py" "$checker" prometheus "$tmp/pid/hugezero.prom" "$src/src/stats.def" "$version" \
	only "${specs[0]}"
check_shown "the service's file: the Prometheus 0.0.4 parser, both targets" \
	"$py" "$checker" prometheus "$tmp/node-exporter/hugezero.prom" "$src/src/stats.def" \
	"$version" among "${specs[@]}"
check "the textfile is mode 0644" [ "$(stat -c %a "$tmp/node-exporter/hugezero.prom")" = 644 ]
# (Other processes under hugezero may come and go between the two runs.)
check "a second run replaced the file by rename (another inode), the same for ours" replaced
check "no temporary file is left" \
	bash -c "[ -z \"\$(ls -A '$tmp/node-exporter' | grep -vx hugezero.prom)\" ]"

# Errors: the file stays as it was, no temporary file stays.
cp "$tmp/node-exporter/hugezero.prom" "$tmp/first.prom"
max=$(cat /proc/sys/kernel/pid_max)
free=$((max - 1))
while [ -e "/proc/$free" ]; do free=$((free - 1)); done
"$hz" stats --textfile "$tmp/node-exporter" "$free" >/dev/null 2>"$tmp/nopid"
check "--textfile with a pid that does not exist: exit 1, says so" \
	bash -c "[ $? = 1 ] && grep -qx 'hugezero stats: no process $free' '$tmp/nopid'"
check "... and leaves the file as it was, no temporary file" \
	bash -c "cmp -s '$tmp/first.prom' '$tmp/node-exporter/hugezero.prom' &&
		[ \$(ls -A '$tmp/node-exporter' | wc -l) = 1 ]"
"$hz" stats --openmetrics "$free" >/dev/null 2>"$tmp/nopid.om"
check "--openmetrics with a pid that does not exist: exit 1, says so" \
	bash -c "[ $? = 1 ] && grep -qx 'hugezero stats: no process $free' '$tmp/nopid.om'"
"$hz" stats --textfile "$tmp/missing" >/dev/null 2>"$tmp/missing.err"
check "--textfile with a missing DIR: exit 1, 'no such directory'" \
	bash -c "[ $? = 1 ] && grep -q -- '--textfile $tmp/missing: cannot create a file there: no such directory' '$tmp/missing.err'"
touch "$tmp/plain"
"$hz" stats --textfile "$tmp/plain" >/dev/null 2>"$tmp/plain.err"
check "--textfile with a file as DIR: exit 1, 'not a directory'" \
	bash -c "[ $? = 1 ] && grep -q 'cannot create a file there: not a directory' '$tmp/plain.err'"
mkdir "$tmp/locked"
chmod 0555 "$tmp/locked"
if [ "$(id -u)" != 0 ]; then
	"$hz" stats --textfile "$tmp/locked" >/dev/null 2>"$tmp/locked.err"
	status=$?
elif command -v setpriv >/dev/null && chmod o+x "$tmp" &&
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$hz" --version >/dev/null 2>&1; then
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$hz" stats --textfile "$tmp/locked" >/dev/null 2>"$tmp/locked.err"
	status=$?
else
	status=skip
	echo "SKIP: a DIR this user may not write (root, without setpriv or nobody)"
fi
if [ "$status" != skip ]; then
	check "--textfile with a DIR this user may not write: exit 1, permission denied" \
		bash -c "[ $status = 1 ] && grep -q 'cannot create a file there: Permission denied' '$tmp/locked.err'"
fi

# systemd's own check of the units. It needs no running systemd (systemd
# 252 verifies in a container where it is not PID 1), only the binary in
# ExecStart and the page Documentation= names: the built ones.
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$tmp/units" "$tmp/man/man1"
	sed "s|^ExecStart=[^ ]*|ExecStart=$hz|" "$units/hugezero-textfile.service" \
		>"$tmp/units/hugezero-textfile.service"
	cp "$units/hugezero-textfile.timer" "$tmp/units/"
	cp "$man_page" "$tmp/man/man1/hugezero.1"
	# It warns of unknown keys and bad values on stderr and exits 0.
	MANPATH=$tmp/man timeout 60 systemd-analyze verify "$tmp/units/hugezero-textfile.service" \
		"$tmp/units/hugezero-textfile.timer" >"$tmp/verify" 2>&1
	check_shown "systemd-analyze verify accepts the units without a word" \
		bash -c "[ $? = 0 ] && [ ! -s '$tmp/verify' ] || { cat '$tmp/verify'; false; }"
else
	echo "SKIP: systemd-analyze verify of the units (no systemd-analyze here)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
