#!/bin/bash
# meson install into a DESTDIR, then use the installed copy as a user would:
# pkg-config to compile an example, the hugezero command to run a program,
# the man pages and headers where they belong.
# usage: install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
libdir=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"))')
root=$dest$prefix
case $libdir in /*) lib=$dest$libdir ;; *) lib=$root/$libdir ;; esac
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for f in "$lib/libhugezero.so" "$lib/libhugezero-preload.so" "$lib/pkgconfig/hugezero.pc" \
	"$root/include/hugezero.h" "$root/bin/hugezero" \
	"$root/share/man/man1/hugezero.1" "$root/share/man/man7/hugezero.7"; do
	[ -e "$f" ] || fail "not installed: ${f#"$dest"}"
done

export PKG_CONFIG_PATH=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
export LD_LIBRARY_PATH=$lib
# shellcheck disable=SC2046 # pkg-config prints several words
cc -o "$dest/clear" "$src/examples/clear.c" $(pkg-config --cflags --libs hugezero) ||
	fail "examples/clear.c does not build with pkg-config"
"$dest/clear" | grep -q 'bytes cleared with' || fail "the example does not run"

if pkg-config --exists jemalloc; then
	# shellcheck disable=SC2046
	cc -o "$dest/jemalloc" "$src/examples/jemalloc.c" \
		$(pkg-config --cflags --libs hugezero jemalloc) ||
		fail "examples/jemalloc.c does not build with pkg-config"
	"$dest/jemalloc" | grep -q 'zeroed every time' || fail "the jemalloc example does not run"
	[ -e "$root/include/hugezero/jemalloc.h" ] || fail "hugezero/jemalloc.h not installed"
else
	echo "SKIP jemalloc example: no jemalloc.pc (apt-get install libjemalloc-dev)"
fi

out=$("$root/bin/hugezero" run --stats -- /usr/bin/python3 -c \
	'import numpy; print(int(numpy.zeros(1 << 24).sum()))' 2>&1) || fail "hugezero run failed"
echo "$out" | grep -q "^0$" || fail "the program's output is wrong under the installed preload"
echo "$out" | grep -q "large requests  1 served" || fail "the installed preload served nothing: $out"
"$root/bin/hugezero" --version | grep -q "^hugezero [0-9]" || fail "hugezero --version"

[ "$failed" -eq 0 ] && echo "install: everything in place and working"
[ "$failed" -eq 0 ]
