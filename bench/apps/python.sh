# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# Plain CPython: millions of small objects (pymalloc arenas), a list and a
# dict that grow to tens of MiB by realloc, sorting and a JSON round trip.
about="CPython: objects, dict, list sort, JSON round trip"
needs=(/usr/bin/python3)
app_setup() {
	records=$(pick 50000 300000)
	param="$((records / 1000))k-records"
}
app_cmd() { cmd=(env PYTHONHASHSEED=0 /usr/bin/python3 "$apps/python-work.py" "$records"); }
app_check() { cat stdout; }
