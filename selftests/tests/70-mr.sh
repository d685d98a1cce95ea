#!/bin/bash
# Memory regions through the rxe provider library: registrations of several
# sizes, alignments and rights with distinct non-zero keys; the errors of bad
# ones (unmapped memory, rights the verbs forbid, zero length, an iova range
# that wraps, RLIMIT_MEMLOCK); and no pinned page left behind, whether the
# program deregisters or just exits.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1

refs() { cat "/sys/module/$MOD_NAME/refcnt"; }
before_refs=$(refs)
sroce_pins_released "before any registration"

out=$(in_h1 "$SROCE_BIN/verbs_mr" "$DEV1" basic 2>&1) || fail "verbs_mr basic: $out"
printf '%s\n' "$out" | sed 's/^/#   /'
assert_contains "$out" "registered 1 MiB remote write" "verbs_mr output"
assert_contains "$out" "all pins released" "verbs_mr output"
assert_contains "$out" "ok" "verbs_mr output"
sroce_pins_released "after deregistration"

# Exit without deregistering: closing the device must unpin everything.
out=$(in_h1 "$SROCE_BIN/verbs_mr" "$DEV1" leave 40 2>&1) || fail "verbs_mr leave: $out"
assert_contains "$out" "registered 40 regions" "verbs_mr leave output"
sroce_pins_released "after exit without deregistration"

# RLIMIT_MEMLOCK, as an unprivileged user (root's CAP_IPC_LOCK bypasses it).
out=$(in_h1 "$SROCE_BIN/verbs_mr" "$DEV1" memlock 2>&1) || fail "verbs_mr memlock: $out"
printf '%s\n' "$out" | sed 's/^/#   /'
assert_contains "$out" "RLIMIT_MEMLOCK: Cannot allocate memory as expected" "memlock output"
assert_contains "$out" "ok" "memlock output"
sroce_pins_released "after the memlock checks"

assert_eq "$before_refs" "$(refs)" "module reference count after the programs exited"
del_link "$DEV1"
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded"
