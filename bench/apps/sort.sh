# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# GNU sort, 1 GiB buffer, two threads: one large buffer filled with the
# whole input and sorted in place by two threads (issue 13's first row).
about="sort -S 1G --parallel=2 on generated lines"
needs=(sort)
app_setup() {
	local lines
	lines=$(pick 1000000 8000000)
	param="$((lines / 1000000))M-lines"
	input=$inputs/lines-$lines.txt
	make_input "$input" "$gen" lines "$lines"
}
app_cmd() { cmd=(sort -S 1G --parallel=2 -o out.txt "$input"); }
app_check() { sha256sum <out.txt; }
