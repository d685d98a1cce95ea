#!/bin/bash
# Completion queues through the rxe provider library: the ring is mapped
# into the process; sizes, limits, resize, notification requests and
# completion channels behave; nothing is left behind.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"

refs() { cat "/sys/module/$MOD_NAME/refcnt"; }
before=$(refs)
out=$(in_h1 "$SROCE_BIN/verbs_cq" "$DEV1" 2>&1) || fail "verbs_cq: $out"
printf '%s\n' "$out"
assert_contains "$out" "all checks passed" "verbs_cq"
# Again: a CQ budget or mapping leaked by the first run would show here.
out=$(in_h1 "$SROCE_BIN/verbs_cq" "$DEV1" 2>&1) || fail "second verbs_cq: $out"
assert_eq "$before" "$(refs)" "module reference count after the programs exited"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
