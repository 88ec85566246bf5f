#!/bin/bash
# docs/containers.md's image recipe and pod, checked without a container
# runtime: the preload named as the recipe names it (a bare name) is found
# and serves, the recipe's build stage installs every build dependency the
# nocheck profile needs, and a program under the preload runs in a real
# memory cgroup with the pod's limit and HUGEZERO_CACHE_MAX (as root).
# usage: containers.sh SOURCE_DIR HUGEZERO_BIN STATS_TARGET_BIN PRELOAD_SO
set -uo pipefail
src=$1
hz=$2
target=$3
preload=$4
docker=$src/docs/containers/Dockerfile
pod=$src/docs/containers/pod.yaml
passed=0
failed=0
tmp=$(mktemp -d)
cg=

cleanup() {
	exec 3>&- 2>/dev/null
	wait 2>/dev/null
	if [ -n "$cg" ]; then
		for _ in 1 2 3 4 5; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

check() { # description, then a command that must succeed
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then
		passed=$((passed + 1))
	else
		echo "FAIL: $what"
		failed=$((failed + 1))
	fi
}

# ---- the image ----

name=$(sed -n 's/^ENV LD_PRELOAD=//p' "$docker")
check "the recipe preloads the preload by its bare name" \
	[ "$name" = "$(basename "$preload")" ]
check "the pod sets the same LD_PRELOAD" \
	bash -c "grep -A1 'name: LD_PRELOAD' '$pod' | grep -q 'value: $name\$'"
LD_LIBRARY_PATH=$(dirname "$preload") LD_PRELOAD=$name HUGEZERO_STATS_FILE="$tmp/bare.%p.json" \
	"$target" </dev/null >/dev/null 2>&1
check "a bare-name LD_PRELOAD found through the loader's search serves large requests" \
	bash -c "cat '$tmp'/bare.*.json | grep -q '\"large_requests\": 5'"
if ldconfig -p 2>/dev/null | grep -q 'libm\.so\.6 '; then
	check "a bare name in LD_PRELOAD is found through the loader's cache (libm.so.6)" \
		bash -c "LD_PRELOAD=libm.so.6 cat /proc/self/maps | grep -q '/libm\.so\.6\$'"
else
	echo "SKIP: the loader's cache has no libm.so.6 to try a bare name with"
fi
# Build-Depends without the nocheck-only ones, each in the build stage's
# apt-get line (debhelper-compat is debhelper's).
deps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$src/debian/control" | sed '$d' |
	sed 's/^Build-Depends://' | tr ',' '\n' | grep -v '<!nocheck>' |
	sed 's/(.*//; s/ //g; s/debhelper-compat/debhelper/' | grep -v '^$')
stage=$(sed -n '/^FROM debian:12 AS build/,/^COPY/p' "$docker" | tr '\\\n' '  ')
for dep in $deps; do
	check "the recipe's build stage installs $dep" bash -c "grep -qw -- '$dep' <<<'$stage'"
done
check "the build stage builds with the nocheck option and profile" \
	grep -q 'DEB_BUILD_OPTIONS=nocheck DEB_BUILD_PROFILES=nocheck dpkg-buildpackage' "$docker"

# ---- the pod's memory limit, in a real cgroup ----

limit=$(sed -n '/limits:/,$p' "$pod" | sed -n 's/^ *memory: *\([0-9]*\)Mi$/\1/p' | head -1)
cache=$(grep -A1 'name: HUGEZERO_CACHE_MAX' "$pod" | sed -n 's/.*value: *//p')
check "the pod has a memory limit in Mi and a HUGEZERO_CACHE_MAX" \
	bash -c "[ -n '$limit' ] && [ -n '$cache' ]"
bytes=$((limit << 20))
v1=/sys/fs/cgroup/memory$(grep ':memory:' /proc/self/cgroup 2>/dev/null | cut -d: -f3)
v2=/sys/fs/cgroup$(grep '^0::' /proc/self/cgroup 2>/dev/null | cut -d: -f3)
if [ "$(id -u)" = 0 ] && [ -w "$v1" ] && [ -e "$v1/memory.limit_in_bytes" ]; then
	cg=$v1/hz-pod-$$
	mkdir "$cg" && echo "$bytes" >"$cg/memory.limit_in_bytes" || cg=
	limit_file=memory.limit_in_bytes
elif [ "$(id -u)" = 0 ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null &&
	grep -qw memory "$v2/cgroup.subtree_control" 2>/dev/null; then
	cg=$v2/hz-pod-$$
	mkdir "$cg" && echo "$bytes" >"$cg/memory.max" || cg=
	limit_file=memory.max
fi
if [ -z "$cg" ]; then
	echo "SKIP: the pod's memory limit (needs root and a memory cgroup this user may make)"
else
	check "the cgroup has the pod's limit" [ "$(cat "$cg/$limit_file")" = "$bytes" ]
	mkfifo "$tmp/ctl"
	# shellcheck disable=SC2016 # the inner shell expands $$
	HUGEZERO_CACHE_MAX=$cache bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2" run "$3"' \
		inner "$cg" "$hz" "$target" <"$tmp/ctl" >"$tmp/ready" 2>"$tmp/err" &
	pid=$!
	exec 3>"$tmp/ctl"
	for _ in $(seq 100); do
		grep -q ready "$tmp/ready" 2>/dev/null && break
		sleep 0.1
	done
	check "a program under the preload starts in the pod's cgroup" \
		grep -qx "$pid" "$cg/cgroup.procs"
	timeout 20 "$hz" stats "$pid" >"$tmp/stats" 2>&1
	check "hugezero stats reads it there" \
		grep -q 'large requests  5 served' "$tmp/stats"
	exec 3>&-
	wait "$pid"
	check "it exits 0 after its large blocks, inside the limit" [ $? = 0 ]
	if [ -e "$cg/memory.failcnt" ]; then
		check "it never reached the limit (failcnt 0)" [ "$(cat "$cg/memory.failcnt")" = 0 ]
	else
		check "it never reached the limit (memory.events max 0)" \
			grep -qx 'max 0' "$cg/memory.events"
	fi
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
