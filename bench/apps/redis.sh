# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# redis-server under load on 127.0.0.1: a mass insert of N keys through
# redis-cli --pipe (values of 50 B - 64 KiB, a few of 2-6 MiB; the key
# table rehashes into ever larger arrays), then redis-benchmark GETs, then
# a digest of the dataset. Only the server runs under the allocator; the
# clients run under glibc. Debian's redis-server is linked with jemalloc:
# its "glibc" row is that jemalloc, as shipped, and hugezero sits on top of
# it (small requests go to jemalloc).
about="redis-server + redis-cli --pipe + redis-benchmark GET (loopback)"
needs=(redis-server redis-cli redis-benchmark)
scope=server
app_setup() {
	keys=$(pick 60000 400000)
	gets=$(pick 100000 600000)
	param="$((keys / 1000))k-keys"
	input=$inputs/redis-$keys.resp
	make_input "$input" "$gen" resp "$keys"
}
app_cmd() { cmd=(bash "$apps/redis-driver.sh" "$input" "$keys" "$gets"); }
app_check() { cat digest.txt; }
