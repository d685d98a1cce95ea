#!/bin/bash
# A QP entering the error state completes its posted receives with flush
# errors, in order, and the completion event reaches the channel.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"

out=$(in_h1 "$SROCE_BIN/verbs_flush" "$DEV1" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 0)) || fail "verbs_flush failed"
assert_contains "$out" "all checks passed" "verbs_flush"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
