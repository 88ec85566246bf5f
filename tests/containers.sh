#!/bin/bash
# docs/containers.md's image recipe and pod, checked without a container
# runtime: the preload named as the recipe names it (a bare name) is found
# and serves, the recipe's build stage installs every build dependency the
# nocheck profile needs, and a program under the preload runs in a real
# memory cgroup with the pod's limit and HUGEZERO_CACHE_MAX, and in a real
# hugetlb cgroup with the pod's hugepages-2Mi limit and HUGEZERO_BACKING
# over a host pool larger than that limit (as root).
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
hcg=
subtree=
nr_saved=
nr_path=/proc/sys/vm/nr_hugepages
pool=/sys/kernel/mm/hugepages/hugepages-2048kB

remove_cgroup() {
	[ -n "$1" ] || return 0
	for _ in 1 2 3 4 5; do rmdir "$1" 2>/dev/null && break; sleep 0.2; done
}

# Also on failure and on signals: the cgroups go, the parent stops offering
# hugetlb if this script enabled it, and the pool gets its size back.
cleanup() {
	exec 3>&- 2>/dev/null
	exec 4>&- 2>/dev/null
	wait 2>/dev/null
	remove_cgroup "$cg"
	remove_cgroup "$hcg"
	[ -n "$subtree" ] && echo -hugetlb >"$subtree" 2>/dev/null
	[ -n "$nr_saved" ] && echo "$nr_saved" >"$nr_path" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# shellcheck source=tests/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

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
	# shellcheck disable=SC2016 # the inner shell expands $$
	check "hugezero status there names the pod's limit" \
		bash -c 'echo $$ >"$1/cgroup.procs" && "$2" status |
			grep -q "^  $1 (v[12]): limit $(($3 >> 20)).0 MiB"' inner "$cg" "$hz" "$bytes"
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

# ---- a container that hides /proc and the cgroup filesystem ----

# The limit cannot be read there, so the cache acts as under the tightest
# one, and the stats say so: a block served from the cache first gives
# back the other block kept beside it. Seen, the limit gives back nothing.
# Without the pre-zero thread, which could hold that other block.
# shellcheck disable=SC2016 # the inner shell expands its own arguments
hidden_run() { # JSON-PREFIX, then "hide" or "see"; 3: could not hide
	unshare -m bash -c '[ "$4" = see ] ||
		{ mount -t tmpfs none /proc && mount -t tmpfs none /sys/fs/cgroup; } || exit 3
		HUGEZERO_PREZERO=off HUGEZERO_STATS_FILE=$3.%p.json LD_PRELOAD=$1 \
			exec "$2" two-freed' \
		inner "$preload" "$target" "$1" "$2" </dev/null >/dev/null 2>&1
}
hidden_run "$tmp/hidden" hide 2>/dev/null
hidden_status=$?
if [ "$(id -u)" != 0 ] || [ "$hidden_status" = 3 ] || ! unshare -m true 2>/dev/null; then
	echo "SKIP: a hidden /proc (needs root, a mount namespace and tmpfs over /proc)"
else
	hidden_run "$tmp/seen" see
	seen_status=$?
	check "a program under the preload exits 0 with /proc hidden ($hidden_status) and seen ($seen_status)" \
		[ "$hidden_status$seen_status" = 00 ]
	unknown() { sed -n 's/.*"cache_limit_unknown": \([0-9]*\).*/\1/p' "$tmp"/"$1".*.json; }
	hidden=$(unknown hidden)
	seen=$(unknown seen)
	check "with /proc hidden, the stats count the cache given back for a limit it cannot read ($hidden)" \
		[ "${hidden:-0}" -ge 1 ]
	check "with /proc seen, they count none ($seen)" [ "$seen" = 0 ]
	# The build tree's rpath ($ORIGIN) needs /proc: the library is named.
	# shellcheck disable=SC2016 # the inner shell expands its own arguments
	check "hugezero status says there that the memory cgroup cannot be read" \
		unshare -m bash -c 'mount -t tmpfs none /proc && mount -t tmpfs none /sys/fs/cgroup &&
			LD_LIBRARY_PATH=$(dirname "$2") "$1" status | grep -q "^  cannot be read"' \
		inner "$hz" "$preload"
fi

# ---- the pod's hugepages-2Mi limit, in a real hugetlb cgroup ----
#
# The host pool has room for more than the limit (96 free 2 MiB pages), so
# what stops hugetlb here is the cgroup: 3 written blocks of 64 MiB, the
# first ones on hugetlb pages up to the pod's 128 MiB, the rest on THP
# (counted as a hugetlb fallback), and no SIGBUS.

hlimit=$(sed -n '/limits:/,$p' "$pod" | sed -n 's/^ *hugepages-2Mi: *\([0-9]*\)Mi$/\1/p' | head -1)
backing=$(grep -A1 'name: HUGEZERO_BACKING' "$pod" | sed -n 's/.*value: *//p')
check "the pod has a hugepages-2Mi limit in Mi and a HUGEZERO_BACKING" \
	bash -c "[ -n '$hlimit' ] && [ -n '$backing' ]"
hbytes=$((hlimit << 20))
want=96 # free pages: the limit (64) and one more block (32)

# Makes the hugetlb cgroup (hcg, hfile, hcur) or says why not (why).
make_hugetlb_cgroup() {
	local v1h v2mnt own
	if [ "$(id -u)" != 0 ]; then
		why="needs root"
		return 1
	fi
	v1h=$(awk '$3 == "cgroup" && $4 ~ /(^|,)hugetlb(,|$)/ { print $2; exit }' /proc/mounts)
	if [ -n "$v1h" ]; then
		own=$(grep -E '^[0-9]+:([^:]*,)?hugetlb(,[^:]*)?:' /proc/self/cgroup | cut -d: -f3)
		hcg=${v1h}${own%/}/hz-pod-hugetlb-$$
		hfile=hugetlb.2MB.limit_in_bytes
		hcur=hugetlb.2MB.usage_in_bytes
	else
		v2mnt=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
		own=$(sed -n 's/^0:://p' /proc/self/cgroup)
		parent=${v2mnt}${own%/}
		if [ -z "$v2mnt" ] || ! grep -qw hugetlb "$parent/cgroup.controllers" 2>/dev/null; then
			why="no hugetlb controller (v1 or v2) for this process's cgroup"
			return 1
		fi
		if ! grep -qw hugetlb "$parent/cgroup.subtree_control"; then
			if ! echo +hugetlb >"$parent/cgroup.subtree_control" 2>/dev/null; then
				why="cannot enable hugetlb in $parent/cgroup.subtree_control"
				return 1
			fi
			subtree=$parent/cgroup.subtree_control
		fi
		hcg=$parent/hz-pod-hugetlb-$$
		hfile=hugetlb.2MB.max
		hcur=hugetlb.2MB.current
	fi
	if ! mkdir "$hcg" 2>/dev/null; then
		why="cannot make $hcg"
		hcg=
		return 1
	fi
	if ! echo "$hbytes" >"$hcg/$hfile" 2>/dev/null; then
		why="cannot set $hcg/$hfile"
		return 1
	fi
}

# Raises the pool to want free pages (a second try after compaction), or
# says why not (why). nr_saved is restored by cleanup.
raise_pool() {
	local nr left try
	if [ ! -d "$pool" ]; then
		why="the kernel has no 2 MiB hugetlb pool"
		return 1
	fi
	nr_saved=$(cat "$nr_path")
	for try in 1 2; do
		[ "$try" = 2 ] && echo 1 >/proc/sys/vm/compact_memory 2>/dev/null
		nr=$(cat "$nr_path")
		left=$(($(cat "$pool/free_hugepages") - $(cat "$pool/resv_hugepages")))
		[ "$left" -ge "$want" ] && return 0
		echo $((nr + want - left)) >"$nr_path" 2>/dev/null
		left=$(($(cat "$pool/free_hugepages") - $(cat "$pool/resv_hugepages")))
		[ "$left" -ge "$want" ] && return 0
	done
	why="the kernel found only $left free 2 MiB pages of $want (memory fragmented, or taken by others)"
	return 1
}

why=
if ! make_hugetlb_cgroup; then
	echo "SKIP: the pod's hugepages-2Mi limit: hugetlb cgroup: $why"
elif ! raise_pool; then
	echo "SKIP: the pod's hugepages-2Mi limit: $why"
else
	check "the hugetlb cgroup has the pod's hugepages-2Mi limit" \
		[ "$(cat "$hcg/$hfile")" = "$hbytes" ]
	mkfifo "$tmp/hctl"
	# shellcheck disable=SC2016 # the inner shell expands $$
	HUGEZERO_BACKING=$backing HUGEZERO_CACHE_MAX=$cache HUGEZERO_STATS_FILE="$tmp/pod.%p.json" \
		bash -c 'echo $$ >"$1/cgroup.procs" && LD_PRELOAD=$2 exec "$3" blocks 3 64' \
		inner "$hcg" "$preload" "$target" <"$tmp/hctl" >"$tmp/hready" 2>"$tmp/herr" &
	hpid=$!
	exec 4>"$tmp/hctl"
	for _ in $(seq 100); do
		grep -q ready "$tmp/hready" 2>/dev/null && break
		sleep 0.1
	done
	check "a program under the preload with the pod's HUGEZERO_BACKING writes its blocks in the pod's hugetlb cgroup" \
		bash -c "grep -q ready '$tmp/hready' && grep -qx '$hpid' '$hcg/cgroup.procs'"
	used=$(cat "$hcg/$hcur")
	smaps=$(awk '/^Private_Hugetlb:/ { kb += $2 } END { print kb * 1024 }' "/proc/$hpid/smaps" 2>/dev/null)
	check "the cgroup counts its hugetlb pages ($used bytes), at most the limit ($hbytes)" \
		bash -c "[ '${used:-0}' -gt 0 ] && [ '${used:-0}' -le $hbytes ]"
	check "its mappings hold them (smaps Private_Hugetlb $smaps bytes)" \
		bash -c "[ '${smaps:-0}' -gt 0 ] && [ '${smaps:-0}' -le $hbytes ]"
	exec 4>&-
	wait "$hpid"
	status=$?
	check "it exits 0 (no SIGBUS; status $status)" [ "$status" = 0 ]
	json=$(cat "$tmp"/pod.*.json 2>/dev/null | tr -d '\n')
	count() { # the JSON's "$1": {"count": N, ...} or "$1": N
		sed -n "s/.*\"$1\": {\"count\": \([0-9]*\).*/\1/p; t; s/.*\"$1\": \([0-9]*\).*/\1/p" <<<"$json"
	}
	huge=$(count hugetlb2m)
	thp=$(count thp)
	fb=$(count hugetlb_mmap_failed)
	huge_bytes=$(sed -n 's/.*"hugetlb2m": {"count": [0-9]*, "bytes": \([0-9]*\).*/\1/p' <<<"$json")
	check "at least one block is hugetlb, within the limit (stats: $huge, $huge_bytes bytes)" \
		bash -c "[ '${huge:-0}' -ge 1 ] && [ '${huge_bytes:-0}' -le $hbytes ]"
	small=$(count 4k)
	slow=$(count fresh_thp_slow)
	rest=$((3 - ${huge:-0}))
	check "the rest fall back from hugetlb, counted in the stats ($rest blocks, $fb fallbacks)" \
		bash -c "[ $rest -ge 1 ] && [ '${fb:-0}' -ge $rest ]"
	# The fallback is THP; a fresh THP block that faults slower than 4 KiB
	# pages (a host that takes free memory back) gets 4 KiB pages instead.
	check "they are THP, or 4 KiB pages after a slow fresh THP (stats: $thp THP, $small 4k, $slow slow)" \
		bash -c "[ $((${thp:-0} + ${small:-0})) = $rest ] && [ '${small:-0}' -le '${slow:-0}' ]"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
