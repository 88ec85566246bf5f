#!/bin/bash
# test_only_symbols.sh NM SHIPPED TEST-CORE: the shipped libhugezero.so has
# none of the test-only functions (consistency checks, cache draining, the
# block-table view, fault injection, the pre-zero thread's test hooks, the
# CPU-feature mask), and the test core has every one of them, so the names
# looked for are right.
set -euo pipefail
nm=$1 shipped=$2 test_core=$3
names=(hz_blocks_check hz_blocks_check_span hz_blocks_view_begin hz_blocks_view_end
	hz_recycle_check hz_recycle_drain hz_prezero_each_held hz_prezero_test_hook
	hz_prim_fault_arm hz_cpu_test_mask)
status=0
shipped_syms=$("$nm" "$shipped")
test_syms=$("$nm" "$test_core")
for name in "${names[@]}"; do
	if grep -qE "^[0-9a-f]* [a-zA-Z] $name\$" <<<"$shipped_syms"; then
		echo "FAIL: $shipped defines $name (test-only code in the shipped library)"
		status=1
	fi
	if ! grep -qE "^[0-9a-f]* [TDB] $name\$" <<<"$test_syms"; then
		echo "FAIL: the test core does not define $name: is the list out of date?"
		status=1
	fi
done
[ $status -eq 0 ] && echo "no test-only symbol in $shipped (${#names[@]} names checked)"
exit $status
