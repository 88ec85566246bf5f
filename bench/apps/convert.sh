# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# ImageMagick 6 (Q16): a large image resized and sharpened. Its pixel cache
# is one large block per image (8 bytes a pixel), on two OpenMP threads.
# Debian's policy.xml caps the cache at 256 MiB of memory (more goes to a
# file), so the image stays under it: 5000x3750 is 150 MB.
about="ImageMagick convert: -resize 70% -unsharp of a generated PPM"
needs=(/usr/bin/convert-im6.q16)
app_setup() {
	local w h
	w=$(pick 2000 5000)
	h=$((w * 3 / 4))
	param="${w}x$h"
	input=$inputs/image-${w}x$h.ppm
	make_input "$input" "$gen" ppm "$w" "$h"
}
app_cmd() { cmd=(/usr/bin/convert-im6.q16 "$input" -resize 70% -unsharp 0x2 out.ppm); }
app_check() { sha256sum <out.ppm; }
