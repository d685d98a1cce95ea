#!/bin/bash
# Shared receive queues and address handles through the rxe provider
# library: sizes, limits, the SRQ limit, an SRQ in use, AH lifecycle,
# cleanup on close.
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
out=$(in_h1 "$SROCE_BIN/verbs_srq_ah" "$DEV1" "$g1" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || fail "verbs_srq_ah failed"
assert_contains "$out" "all checks passed" "verbs_srq_ah"
out=$(in_h1 "$SROCE_BIN/verbs_srq_ah" "$DEV1" "$g1" 2>&1) || fail "second verbs_srq_ah: $out"
assert_eq "$before" "$(refs)" "module reference count after the programs exited"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
