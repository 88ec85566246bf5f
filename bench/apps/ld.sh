# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# GNU ld (bfd) linking a PIE from objects with many sections: every input
# section, symbol and relocation has its own record (objalloc chunks and
# malloc), the global symbol table grows by rehashing, mergeable strings
# are hashed, and the files are read in; about 1 GiB at the full size.
about="ld.bfd linking generated objects: functions in their own sections"
needs=(gcc as ld.bfd)
app_setup() {
	local files funcs i dir
	files=$(pick 4 8)
	funcs=$(pick 5000 20000)
	param="${files}x$((funcs / 1000))k-functions"
	dir=$inputs/ld-$files-$funcs
	objects=("$dir/main.o")
	for ((i = 0; i < files; i++)); do
		objects+=("$dir/p$i.o")
	done
	[ -f "$dir/done" ] && return 0
	echo "run-apps: generating $dir" >&2
	mkdir -p "$dir"
	for ((i = 0; i < files; i++)); do
		"$gen" asm "$funcs" "$files" "$i" >"$dir/p$i.s"
		as -o "$dir/p$i.o" "$dir/p$i.s"
		rm "$dir/p$i.s"
	done
	printf 'int p0_f0(int);\nint main(int argc, char **argv)\n{\n\t(void)argv;\n\treturn p0_f0(argc) == 42;\n}\n' >"$dir/main.c"
	gcc -O1 -c -o "$dir/main.o" "$dir/main.c"
	touch "$dir/done"
}
app_cmd() { cmd=(gcc -fuse-ld=bfd -o out.bin "${objects[@]}"); }
app_check() { sha256sum <out.bin; }
