#!/bin/bash
# Work requests a process writes into its own (mapped, writable) send ring
# are not trusted (selftests/progs/forged_wqe), over each GID type: a UD
# address vector's source address never leaves the host unless it is the
# device's own GID; an address handle of another PD is refused; a malformed
# RC WQE completes with its own error, not as flushed.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's checks of work requests"
two_devices
g_v4=$G1
g_v6=$(gid_index sroce1 fd77:1::1)
for g in "$g_v4" "$g_v6"; do
	rc=0
	out=$(in_h1 timeout 120 "$SROCE_BIN/forged_wqe" sroce1 "$g" 2>&1) || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "forged_wqe over GID $g exited $rc"
	assert_contains "$out" "all checks passed" "forged_wqe over GID $g"
done
del_link sroce1
del_link sroce2
