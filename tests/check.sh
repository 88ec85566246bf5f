# Shared by the shell tests (cli.sh, cli/stats.sh, containers.sh): each
# check counts into passed/failed, which the sourcing script set to 0 and
# reports at its end.

check() { # description, then a command that must succeed
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then
		passed=$((passed + 1))
	else
		echo "FAIL: $what"
		failed=$((failed + 1))
	fi
}

status_of() { "$@" >/dev/null 2>&1; echo $?; }
