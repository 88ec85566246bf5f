#!/bin/bash
# Build the Debian packages from a clean copy of the tree (debian/), install
# them with dpkg, use them as a user would (hugezero run on numpy, pkg-config,
# the man pages), run lintian, then purge them so the machine is as before.
# usage: tests/deb.sh   (as root: it installs packages; a minute on an idle 2-vCPU machine)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
start=$SECONDS

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP deb: installing the packages needs root"
	exit 0
fi
ours=(hugezero libhugezero0 libhugezero-dev)
for p in "${ours[@]}"; do
	if installed "$p"; then
		echo "SKIP deb: $p is installed already, and this test would purge it"
		exit 0
	fi
done
# The build dependencies (debian/control), the tools, and numpy for the run.
need_packages build-essential dpkg-dev debhelper meson ninja-build pkg-config \
	libcmocka-dev libjemalloc-dev lintian man-db python3-numpy
# The checks are a user's default environment.
unset LD_PRELOAD MANPATH

work=$(mktemp -d)
purge=0
cleanup() {
	if [ "$purge" -eq 1 ]; then dpkg --purge "${ours[@]}" >/dev/null; fi
	rm -rf "$work"
}
trap cleanup EXIT

# A clean copy: the tracked and new files as they are in the work tree, no
# build output (.gitignore), so a local run tests local edits and CI's clean
# clone gives the same tree.
version=$(dpkg-parsechangelog -S Version)
upstream=${version%-*}
src=$work/hugezero-$upstream
mkdir "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	while IFS= read -r -d '' f; do
		if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
	done < <(git ls-files -z -c -o --exclude-standard) |
		tar --null -T - -cf - | tar -xf - -C "$src"
else
	tar --exclude='./build*' --exclude='./obj-*' -cf - . | tar -xf - -C "$src"
fi

echo "== deb: dpkg-buildpackage -us -uc -b"
log=$work/build.log
if ! (cd "$src" && dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
	tail -n 60 "$log"
	echo "FAIL: dpkg-buildpackage (last 60 lines above)"
	exit 1
fi
case " ${DEB_BUILD_OPTIONS:-} " in
*" nocheck "*) echo "deb: unit tests skipped (nocheck)" ;;
*)
	awk '/^Ok:/ { ok = $2 } /^Fail:/ { bad = $2 } /^Skipped:/ { skip = $2 }
		END { printf "deb: unit tests in the package build: %d ok, %d failed, %d skipped\n", ok, bad, skip }' "$log"
	if ! grep -Eq '^Ok: +[1-9]' "$log" || ! grep -Eq '^Fail: +0' "$log"; then
		echo "FAIL: the package build did not run and pass the unit suite"
		exit 1
	fi
	;;
esac
echo "deb: built in $((SECONDS - start)) s"

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
debs=()
for p in "${ours[@]}"; do
	debs+=("$work/${p}_${version}_$arch.deb")
done
purge=1
dpkg -i "${debs[@]}" >/dev/null

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

[ "$(command -v hugezero)" = /usr/bin/hugezero ] || fail "hugezero is not /usr/bin/hugezero"
hugezero --version | grep -qx "hugezero $upstream" || fail "hugezero --version is not $upstream"

# hugezero run finds the preload next to the installed libhugezero.so.0.
# shellcheck disable=SC2016 # the inner shell expands it
preload=$(hugezero run -- /bin/sh -c 'printf %s "$LD_PRELOAD"') || fail "hugezero run /bin/sh"
case $preload in
"/usr/lib/$multiarch/libhugezero-preload.so" | "/lib/$multiarch/libhugezero-preload.so") ;;
*) fail "hugezero run preloads '$preload', not the installed copy" ;;
esac

# A real program under the installed preload: its output, and hugezero's
# own count of the large requests it served.
out=$(cd "$work" && HUGEZERO_STATS_FILE="$work/stats.%p.json" hugezero run -- \
	/usr/bin/python3 -c 'import numpy; print(int(numpy.zeros(1 << 25).sum()))' 2>&1) ||
	fail "hugezero run python3: $out"
[ "$out" = 0 ] || fail "numpy's output is wrong under the installed preload: $out"
served=$(python3 -c 'import glob, json, sys
print(sum(json.load(open(f))["large_requests"] for f in glob.glob(sys.argv[1])))' \
	"$work/stats.*.json") || served=0
[ "$served" -ge 1 ] || fail "the installed preload served no large request (stats: $served)"

# pkg-config, the headers and the link library, through the examples.
pkg-config --libs hugezero | grep -qw -- -lhugezero || fail "pkg-config --libs hugezero"
# shellcheck disable=SC2046 # pkg-config prints several words
if cc -o "$work/clear" "$src/examples/clear.c" $(pkg-config --cflags --libs hugezero); then
	"$work/clear" | grep -q 'bytes cleared with' || fail "examples/clear.c does not run"
else
	fail "examples/clear.c does not build against the installed package"
fi
# shellcheck disable=SC2046
if cc -o "$work/jemalloc" "$src/examples/jemalloc.c" \
	$(pkg-config --cflags --libs hugezero jemalloc); then
	"$work/jemalloc" | grep -q 'zeroed every time' || fail "examples/jemalloc.c does not run"
else
	fail "examples/jemalloc.c does not build against the installed package"
fi

for page in "1 hugezero" "7 hugezero" "1 hugezero-folios" "1 hugezero-prewarm"; do
	# shellcheck disable=SC2086 # section and name
	if text=$(MANWIDTH=80 man -P cat $page 2>&1); then
		grep -q '^NAME' <<<"$text" || fail "man $page shows no page"
	else
		fail "man $page: $text"
	fi
done

echo "== deb: lintian"
lint=$(lintian "$work/hugezero_${version}_$arch.changes" 2>&1) || fail "lintian reports errors"
grep -v '^running with root privileges' <<<"$lint" || true

purge=0
dpkg --purge "${ours[@]}" >/dev/null
for p in "${ours[@]}"; do
	if installed "$p"; then fail "$p is still installed after the purge"; fi
done
[ ! -e /usr/bin/hugezero ] || fail "/usr/bin/hugezero is left behind"

[ "$failed" -eq 0 ] && echo "deb: built, installed, used and purged in $((SECONDS - start)) s"
[ "$failed" -eq 0 ]
