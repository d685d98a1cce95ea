#!/bin/bash
# Memory windows, types 1 and 2B, through stock rdma-core, by the verbs_mw
# program: the device's capabilities; type 1 windows bound with ibv_bind_mw
# and type 2 windows bound with bind work requests (ibv_post_send and the
# extended QP API), WRITE, READ and both atomics through them byte for
# byte; the accesses a window refuses (outside its bounds, rights it lacks,
# an rkey a re-bind replaced, bogus rkeys, a type 2 window through a QP it
# is not bound to, after local and remote invalidation, after dealloc) with
# REM_ACCESS_ERR and nothing written; binds that fail (an MR without
# MW_BIND, a bound type 2 window, a zero-based type 1 window); an MR with a
# bound window refusing to deregister; a zero-based type 2 window. Between
# two devices both ways and, for sroce, one device to itself over its
# link-local GID; then programs that exit with windows still bound leave
# nothing pinned or referenced. Runs for rxe too (SROCE_TESTS_TYPE=rxe), as
# the reference, where what rxe gets wrong is a note (verbs_mw's "rxe"
# argument): it enforces an MR's bounds, not a window's; it completes a
# failed bind as flushed, not MW_BIND_ERR; it flags a receive that
# invalidated with the kernel's bit, which libibverbs reads as
# IBV_WC_IP_CSUM_OK, not IBV_WC_WITH_INV. sroce's counters mw_bind,
# local_inv and remote_inv must move.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

two_devices
on_exit del_all_links

# The checks only sroce is held to are notes in the reference run.
ref=()
[[ $LINK_TYPE == sroce ]] || ref=(rxe)
verbs_mw() { checks_pass verbs_mw "$@"; }

binds0=$(hw_counter_or_0 "$DEV2" mw_bind)
linv0=$(hw_counter_or_0 "$DEV2" local_inv) rinv0=$(hw_counter_or_0 "$DEV2" remote_inv)
verbs_mw "$DEV1" "$G1" "$DEV2" "$G2" "${ref[@]}"
if [[ $LINK_TYPE == sroce ]]; then
	# B (DEV2) bound, and invalidated locally and on a peer's SEND.
	binds=$(($(hw_counter_or_0 "$DEV2" mw_bind) - binds0))
	linv=$(($(hw_counter_or_0 "$DEV2" local_inv) - linv0))
	rinv=$(($(hw_counter_or_0 "$DEV2" remote_inv) - rinv0))
	log "$DEV2: mw_bind +$binds, local_inv +$linv, remote_inv +$rinv"
	((binds >= 8 && linv >= 2 && rinv >= 1)) ||
		fail "window counters did not move: mw_bind +$binds, local_inv +$linv, remote_inv +$rinv"
fi
verbs_mw "$DEV2" "$G2" "$DEV1" "$G1" "${ref[@]}"
if [[ $LINK_TYPE == sroce ]]; then
	ll=$(gid_table "$DEV1" | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
	[[ -n $ll ]] || fail "no link-local RoCE v2 GID on $DEV1"
	verbs_mw "$DEV1" "$ll" "$DEV1" "$ll"
fi

# Exiting with windows bound (a type 1 on an MR, a type 2 on a QP) frees
# them, their MR and QP: nothing stays pinned, the module's reference
# count comes back.
refs() { cat "/sys/module/$MOD_NAME/refcnt"; }
sroce_pins_released "before the programs that exit with windows bound"
before_refs=$(refs)
verbs_mw "$DEV1" "$G1" "$DEV2" "$G2" leave
sroce_pins_released "after a program exited with windows bound"
# Destroying a QP that a type 2 window is still bound to, rxe waits 50 s
# for the window and warns (__rxe_cleanup): only sroce is held to a type 2
# window that outlives its QP at exit.
if [[ $LINK_TYPE == sroce ]]; then
	verbs_mw "$DEV2" "$G2" "$DEV1" "$G1" leave mw-first
	sroce_pins_released "after a program exited with a type 2 window bound to a QP made after it"
fi
retry 5 bash -c "(( \$(cat /sys/module/$MOD_NAME/refcnt) == $before_refs ))" || true
assert_eq "$before_refs" "$(refs)" "module reference count after the programs exited"
