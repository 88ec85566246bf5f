# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# numpy: N x (zeros(4M doubles), ones_like, multiply, sum), four 32 MiB
# arrays per iteration that a recycling allocator can reuse (issue 13: tcmalloc
# 3.61 s against hugezero's 3.72 s).
about="numpy: N x zeros(4M), ones_like, multiply, sum"
needs=(/usr/bin/python3)
app_setup() {
	iterations=$(pick 40 300)
	param="$iterations-iterations"
	/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip="/usr/bin/python3 has no numpy (apt-get install -y python3-numpy)"
}
app_cmd() { cmd=(/usr/bin/python3 "$apps/numpy-loop.py" "$iterations"); }
app_check() { cat stdout; }
