# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# xz -9 single-threaded: a 64 MiB dictionary and its match finder's hash
# tables, touched sparsely for a small input (issue 13: RSS doubled whenever
# THP backed those tables).
about="xz -9 -T1 on generated text"
needs=(xz)
app_setup() {
	local bytes
	bytes=$(pick 500000 4000000)
	param="$((bytes / 1000))kB"
	input=$inputs/text-$bytes.txt
	make_input "$input" "$gen" text "$bytes"
}
app_cmd() { cmd=(xz -9 -T1 -c "$input"); }
app_check() { sha256sum <stdout; }
