#!/bin/bash
# Queue pairs through the rxe provider library: rings mapped into the
# process, granted sizes, the IBTA state machine and its required
# attributes, query, bad values, cleanup on close.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"
g1=$(gid_index "$DEV1" 10.77.1.1)

refs() { cat "/sys/module/$MOD_NAME/refcnt"; }
before=$(refs)
out=$(in_h1 "$SROCE_BIN/verbs_qp" "$DEV1" "$g1" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || fail "verbs_qp failed"
assert_contains "$out" "all checks passed" "verbs_qp"
out=$(in_h1 "$SROCE_BIN/verbs_qp" "$DEV1" "$g1" 2>&1) || fail "second verbs_qp: $out"
assert_eq "$before" "$(refs)" "module reference count after the programs exited"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
