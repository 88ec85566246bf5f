# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# gcc -O2 -S: cc1's obstacks and GC pages, about a hundred 2 MiB anonymous
# mmaps (issue 13: hugezero 0.93x glibc, sys time 2x).
about="gcc -O2 -S on a generated C file"
needs=(gcc)
app_setup() {
	local n
	n=$(pick 80 500)
	param="$n-functions"
	input=$inputs/csrc-$n.c
	make_input "$input" "$gen" csrc "$n"
}
app_cmd() { cmd=(gcc -O2 -S -o out.s "$input"); }
app_check() { sha256sum <out.s; }
