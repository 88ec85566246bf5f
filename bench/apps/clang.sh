# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# clang -O2 -S: LLVM's bump-pointer slabs and many small objects, a second
# compiler with another allocation pattern than cc1's.
about="clang -O2 -S on a generated C file"
needs=(clang)
app_setup() {
	local n
	n=$(pick 100 500)
	param="$n-functions"
	input=$inputs/csrc-$n.c
	make_input "$input" "$gen" csrc "$n"
}
app_cmd() { cmd=(clang -O2 -S -o out.s "$input"); }
app_check() { sha256sum <out.s; }
