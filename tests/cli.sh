#!/bin/bash
# The hugezero command: version, help, exit codes, LD_PRELOAD handling,
# option validation, and status listing every option.
# usage: cli.sh HUGEZERO_BIN VERSION
set -uo pipefail
hz=$1
version=$2
passed=0
failed=0

# shellcheck source=tests/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

check "--version prints the meson version" \
	bash -c "[ \"\$('$hz' --version)\" = 'hugezero $version' ]"
check "--help exits 0 and lists run and status" \
	bash -c "'$hz' --help | grep -q 'run \[OPTIONS\]' && '$hz' --help | grep -q status"
check "run --help exits 0" "$hz" run --help
check "status --help exits 0" "$hz" status --help
check "no command is a usage error (2)" [ "$(status_of "$hz")" = 2 ]
check "unknown command is a usage error (2)" [ "$(status_of "$hz" frobnicate)" = 2 ]
check "hugezero-folios names the process it cannot read, options first or last" \
	bash -c "'$(dirname "$hz")/hugezero-folios' --all 999999999 2>&1 | grep -qF '/proc/999999999:' &&
		'$(dirname "$hz")/hugezero-folios' 999999999 --all 2>&1 | grep -qF '/proc/999999999:'"
check "run passes the exit status through" [ "$(status_of "$hz" run -- sh -c 'exit 7')" = 7 ]
check "run of a missing command exits 127" [ "$(status_of "$hz" run no-such-command-xyz)" = 127 ]
check "run of something not executable exits 126" [ "$(status_of "$hz" run /tmp)" = 126 ]
check "run rejects a bad --backing value (2)" [ "$(status_of "$hz" run --backing huge true)" = 2 ]
check "run rejects a bad --threshold value (2)" [ "$(status_of "$hz" run --threshold 12Q true)" = 2 ]
check "run rejects a bad --exec value (2)" [ "$(status_of "$hz" run --exec fast true)" = 2 ]
check "a bad --exec value names the valid choices, as the variable's warning does" \
	bash -c "'$hz' run --exec fast true 2>&1 >/dev/null |
		grep -qF -- '--exec: HUGEZERO_EXEC=fast is not valid (valid: off|advise|remap)' &&
		HUGEZERO_EXEC=fast '$hz' status 2>&1 >/dev/null |
		grep -qF 'HUGEZERO_EXEC=fast is not valid (valid: off|advise|remap); using the default'"
check "a bad --prezero value names the valid choices" \
	bash -c "'$hz' run --prezero later true 2>&1 | grep -qF 'HUGEZERO_PREZERO=later is not valid (valid: thread|sync|off)'"
check "an out-of-range --threshold says so" \
	bash -c "'$hz' run --threshold 1K true 2>&1 | grep -qF 'HUGEZERO_THRESHOLD=1K is out of range (valid: 4K..1T)'"
check "a value flag without its value is a usage error (2)" \
	bash -c "[ \"\$('$hz' run --exec 2>&1 >/dev/null; echo \$?)\" = \"\$(printf 'hugezero run: --exec needs a value (off|advise|remap)\\n2')\" ]"
check "run --help lists each choice option's words from the table" \
	bash -c "'$hz' run --help | grep -qF -- '--backing auto|hugetlb1g|hugetlb2m|thp|none' &&
		'$hz' run --help | grep -qF -- '--prezero thread|sync|off' &&
		'$hz' run --help | grep -qF -- '--exec off|advise|remap'"
check "run rejects an unknown option (2)" [ "$(status_of "$hz" run --frob true)" = 2 ]
check "run without a command is a usage error (2)" [ "$(status_of "$hz" run --stats)" = 2 ]
check "run puts the preload in LD_PRELOAD" \
	bash -c "'$hz' run sh -c 'echo \$LD_PRELOAD' | grep -q '/libhugezero-preload.so\$'"
check "run appends to an existing LD_PRELOAD" \
	bash -c "LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6 '$hz' run sh -c 'echo \$LD_PRELOAD' |
		grep -q '^/lib/x86_64-linux-gnu/libc.so.6:.*libhugezero-preload.so\$'"
check "run maps flags to HUGEZERO_* variables" \
	bash -c "'$hz' run --backing thp --threshold 4M --prezero sync --stats -vv sh -c \
		'echo \$HUGEZERO_BACKING \$HUGEZERO_THRESHOLD \$HUGEZERO_PREZERO \$HUGEZERO_STATS \$HUGEZERO_VERBOSE' 2>/dev/null |
		grep -qx 'thp 4M sync 1 2'"
check "run maps --exec, --populate and --no-populate to HUGEZERO_* variables" \
	bash -c "'$hz' run --exec remap --populate sh -c 'echo \$HUGEZERO_EXEC \$HUGEZERO_POPULATE' 2>/dev/null |
		grep -qx 'remap 1' &&
		'$hz' run --populate --no-populate sh -c 'echo \$HUGEZERO_POPULATE' 2>/dev/null | grep -qx 0"
check "run --stats reports at exit, even when the program closed stderr" \
	bash -c "'$hz' run --stats /bin/true 2>&1 | grep -q 'hugezero: stats for pid'"
check "status exits 0 and ends with advice" bash -c "'$hz' status | grep -q '^advice'"
for opt in $(grep -o '^HZ_OPTION([A-Z_0-9]*' "$(dirname "$0")/../src/options.def" | cut -c11-); do
	check "status lists HUGEZERO_$opt" bash -c "'$hz' status | grep -q 'HUGEZERO_$opt '"
done
check "status says the memory cgroup's limit, or that it cannot be read" \
	bash -c "'$hz' status | grep -A1 '^memory cgroup\$' |
		grep -Eq '^  (/.* \(v[12]\): (no limit|limit [0-9.]+ MiB)|cannot be read \()'"
check "status lines its options up" \
	bash -c "[ \$('$hz' status | grep -E '^  HUGEZERO_[A-Z_]+ +[^ ]+ +\\(' |
		awk '{ print index(\$0, \$2) }' | sort -u | wc -l) = 1 ]"
check "status names an invalid environment value" \
	bash -c "HUGEZERO_THRESHOLD=lots '$hz' status 2>/dev/null | grep -q 'HUGEZERO_THRESHOLD.*invalid'"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
