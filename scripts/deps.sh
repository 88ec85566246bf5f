# need_packages PKG[:ARCH]...: make sure Debian packages are installed. As
# root, install the missing ones (adding the arm64 architecture when a :arm64
# package is asked for); otherwise print the commands and exit 1. Quiet and
# does nothing when everything is there.

# installed PKG[:ARCH]: true when that package is installed for ARCH, which
# defaults to the native one (or "all"). A bare dpkg-query name also matches
# other architectures' instances, so libcmocka-dev:arm64 alone would pass for
# libcmocka-dev.
installed() {
	local name=${1%%:*} arch=${1#*:}
	[ "$arch" = "$1" ] && arch=$(dpkg --print-architecture)
	# grep without -q reads all input: under pipefail an early exit could
	# kill dpkg-query with SIGPIPE and fail the check.
	dpkg-query -W -f='${Status} ${Architecture}\n' "$name" 2>/dev/null |
		grep -xE "install ok installed ($arch|all)" >/dev/null
}

need_packages() {
	local native missing=() foreign=() p a
	native=$(dpkg --print-architecture)
	for p in "$@"; do
		installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	# Foreign architectures the missing packages need that dpkg lacks.
	for p in "${missing[@]}"; do
		a=${p#*:}
		if [ "$a" != "$p" ] && [ "$a" != "$native" ] &&
		   ! dpkg --print-foreign-architectures | grep -x "$a" >/dev/null; then
			case " ${foreign[*]} " in *" $a "*) ;; *) foreign+=("$a") ;; esac
		fi
	done
	if [ "$(id -u)" -ne 0 ]; then
		echo "hugezero: missing Debian packages; install them with:" >&2
		for a in "${foreign[@]}"; do
			echo "  sudo dpkg --add-architecture $a" >&2
		done
		echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	for a in "${foreign[@]}"; do
		dpkg --add-architecture "$a"
	done
	echo "hugezero: installing ${missing[*]}" >&2
	# Always refresh: a new architecture has no package lists until then, and
	# old lists may name versions the mirror no longer has.
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
