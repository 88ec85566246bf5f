#!/bin/bash
# Run one of glibc's malloc tests twice, with the installed glibc alone and
# under libhugezero-preload.so (default options); both runs must pass
# (exit 0), or both report the test unsupported (77: skipped).
#
# usage: run.sh PRELOAD_SO TARBALL OUT TEST [VAR=VALUE...]
# VAR=VALUE: the environment glibc's malloc/Makefile gives the test.
set -uo pipefail
here=$(dirname "$(realpath "$0")")
preload=$(realpath "$1")
tarball=$2 out=$(realpath -m "$3") name=$4
shift 4
bash "$here/build.sh" "$tarball" "$out" "$here" "$name"
case $? in
0) ;;
77) exit 77 ;;
*) echo "FAIL: could not build $name"; exit 1 ;;
esac
# tst-free-errno maps 4 KiB pages with MAP_FIXED over the ends of a 16 MiB
# block, as glibc lays its mmapped chunks out. With free hugetlb pool
# pages hugezero backs that block with hugetlb, where 4 KiB MAP_FIXED is
# EINVAL: the hostile suite's hugetlb_pool_* cases cover that difference.
if [ "$name" = tst-free-errno ]; then
	for f in /sys/kernel/mm/hugepages/hugepages-*/free_hugepages; do
		if [ ! -r "$f" ] || [ "$(cat "$f")" -eq 0 ]; then
			continue
		fi
		echo "SKIP: the hugetlb pool has $(cat "$f") free pages ($f), where blocks may be hugetlb memory"
		exit 77
	done
fi
# The driver's own timeouts, stretched for a shared, loaded machine.
export TIMEOUTFACTOR=${TIMEOUTFACTOR:-4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

run() { # label, then the environment to add
	local label=$1 rc
	shift
	env "$@" "$out/bin/$name" >"$work/$label.out" 2>&1
	rc=$?
	echo "$label: exit $rc"
	sed "s/^/  $label| /" "$work/$label.out" | tail -n 20
	return $rc
}

# A test that preloads glibc's libc_malloc_debug.so gets hugezero in front
# of it: the debug malloc is then the next allocator.
hz_env=()
ld_preload=$preload
for v in "$@"; do
	case $v in
	LD_PRELOAD=*) ld_preload="$preload:${v#LD_PRELOAD=}" ;;
	*) hz_env+=("$v") ;;
	esac
done
run glibc "$@"
glibc=$?
run hugezero "${hz_env[@]}" LD_PRELOAD="$ld_preload"
hz=$?
if [ $glibc -eq 77 ] && [ $hz -eq 77 ]; then
	echo "SKIP: $name is unsupported here (both runs)"
	exit 77
fi
if [ $glibc -ne 0 ]; then
	echo "FAIL: $name fails under glibc alone (exit $glibc): not a test of hugezero here"
	exit 1
fi
if [ $hz -ne 0 ]; then
	echo "FAIL: $name passes under glibc, exits $hz under the preload"
	exit 1
fi
echo "ok: $name passes under glibc and under the preload"
