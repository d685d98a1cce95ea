#!/bin/bash
# Protection domains through the rxe provider library: allocate, free, and
# leave some for close to release; the module's reference count and the
# device come back to where they were.
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
out=$(in_h1 "$SROCE_BIN/verbs_pd" "$DEV1" 200 2>&1) || fail "verbs_pd: $out"
assert_contains "$out" "allocated 200 PDs" "verbs_pd output"
assert_contains "$out" "ok" "verbs_pd output"
# Twice, so a leaked budget or reference would show.
out=$(in_h1 "$SROCE_BIN/verbs_pd" "$DEV1" 200 2>&1) || fail "second verbs_pd: $out"
assert_eq "$before" "$(refs)" "module reference count after the programs exited"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
