#!/bin/bash
# Build glibc's portable malloc tests against the installed C library:
# extract malloc/, support/ and the few internal headers they include from
# Debian's glibc-source tarball, build support/ (glibc's test driver) into
# libsupport.a, then each test named on the command line into OUT/bin.
# Idempotent and safe to run from parallel tests (one builder at a time).
#
# usage: build.sh TARBALL OUT SHIM_DIR TEST...
# Exit 77 (skip) with the reason when the tarball is missing.
set -euo pipefail
tarball=$1 out=$2 shim=$3
shift 3
cc=${CC:-cc}
if [ ! -r "$tarball" ]; then
	echo "SKIP: $tarball not found (apt-get install glibc-source)"
	exit 77
fi
mkdir -p "$out"
exec 9>"$out/lock"
flock 9
version=$(basename "$tarball" .tar.xz) # glibc-2.36
src=$out/$version
if [ ! -e "$src/.extracted" ]; then
	rm -rf "$src"
	tar -xJf "$tarball" -C "$out" "$version/malloc" "$version/support" \
		"$version/test-skeleton.c" "$version/include/array_length.h" \
		"$version/include/libc-diag.h" "$version/include/scratch_buffer.h"
	# Internal headers that stand alone, copied next to the shim's own:
	# the rest of include/ would shadow the installed headers.
	mkdir -p "$out/include"
	cp "$src"/include/*.h "$out/include/"
	touch "$src/.extracted"
fi
# Built without optimisation of allocator calls (-fno-builtin): the tests
# must reach malloc, not have the compiler fold a malloc/free pair.
cflags=(-O2 -g -w -fno-builtin -D_GNU_SOURCE -std=gnu11 -include "$shim/shim.h"
	-I "$shim/include" -I "$out/include" -I "$src" -I "$src/support"
	-DSRCDIR_PATH="\"$src\"" -DOBJDIR_PATH="\"$out\"" -DINSTDIR_PATH="\"/\""
	-DLIBDIR_PATH="\"/usr/lib\"" -DBINDIR_PATH="\"/usr/bin\""
	-DSBINDIR_PATH="\"/usr/sbin\"" -DSLIBDIR_PATH="\"/lib\""
	-DROOTSBINDIR_PATH="\"/sbin\"" -DCOMPLOCALEDIR_PATH="\"/usr/lib/locale\""
	-DOBJDIR_ELF_LDSO_PATH="\"/lib/ld-linux.so\"")
if [ ! -e "$out/libsupport.a" ]; then
	mkdir -p "$out/support"
	# Every support/ file that builds outside glibc; the few that need
	# glibc's internals (stack layout, time64 aliases, its test container)
	# are left out, and no selected test uses them.
	for f in "$src"/support/*.c; do
		case $(basename "$f") in
		test-driver.c | test-container.c | tst-*.c | *_main.c) continue ;;
		esac
		"$cc" "${cflags[@]}" -c "$f" -o "$out/support/$(basename "$f" .c).o" 2>/dev/null ||
			rm -f "$out/support/$(basename "$f" .c).o"
	done
	"$cc" "${cflags[@]}" -c "$src/support/support_test_main.c" -o "$out/support/support_test_main.o"
	ar rcs "$out/libsupport.a.tmp" "$out"/support/*.o
	mv "$out/libsupport.a.tmp" "$out/libsupport.a"
fi
mkdir -p "$out/bin"
for t in "$@"; do
	[ -x "$out/bin/$t" ] && continue
	"$cc" "${cflags[@]}" "$src/malloc/$t.c" "$out/libsupport.a" -lpthread -lrt \
		-o "$out/bin/$t.tmp" >"$out/bin/$t.log" 2>&1 || {
		echo "build of $t failed:"
		cat "$out/bin/$t.log"
		exit 1
	}
	mv "$out/bin/$t.tmp" "$out/bin/$t"
done
