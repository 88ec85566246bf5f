# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# zstd at its strongest with a 2 GiB long-distance window, reading a pipe
# as in `tar c | zstd`: the input's size is unknown, so the window and its
# match tables are allocated in full (blocks of up to 4 GiB, touched
# sparsely) and made once (issue 13: hugezero 0.91x glibc, sys time 3x).
# Given a file instead, zstd shrinks them to the file's size.
about="zstd --ultra -22 --long=31 -T1 on generated text"
needs=(zstd)
app_setup() {
	local bytes
	bytes=$(pick 300000 3000000)
	param="$((bytes / 1000))kB"
	input=$inputs/text-$bytes.txt
	make_input "$input" "$gen" text "$bytes"
	stdin=$input
}
app_cmd() { cmd=(zstd -q --ultra -22 --long=31 -T1 -c -); }
app_check() { sha256sum <stdout; }
