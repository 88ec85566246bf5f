# need_packages PKG...: make sure Debian packages are installed. As root,
# install the missing ones (adding the arm64 architecture when a :arm64
# package is asked for); otherwise print the apt-get line and exit 1.
need_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		case "${missing[*]}" in *:arm64*)
			echo "hugezero: first enable arm64 packages: sudo dpkg --add-architecture arm64" >&2 ;;
		esac
		echo "hugezero: missing Debian packages; install them with:" >&2
		echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	case "${missing[*]}" in *:arm64*)
		dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64 ;;
	esac
	echo "hugezero: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
