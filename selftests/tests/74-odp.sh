#!/bin/bash
# On-demand paging (IBV_ACCESS_ON_DEMAND) through stock rdma-core, by the
# verbs_odp program: ibv_devinfo -v and ibv_query_device_ex report
# ODP_SUPPORT, SEND, RECV, WRITE, READ, ATOMIC and SRQ for RC, SEND and RECV
# for UD; implicit ODP works where reported (sroce: whole address space,
# memory mapped after registration, chunk boundaries) and is refused where
# not (rxe); ibv_advise_mr prefetches; RC SEND, WRITE, READ and both atomics,
# SRQ receives and UD SENDs into ODP memory that was never touched (8 B,
# 4 KiB, 1 MiB at path MTU 1024), into memory dropped with MADV_DONTNEED or
# unmapped and mapped again at the same address between operations (the new
# bytes seen, the old never), into transparent huge pages; memory unmapped
# under an ODP MR (or never mapped) fails the access (REM_ACCESS_ERR,
# LOC_PROT_ERR) within a timeout, never a hang. Between two devices both ways
# and, for sroce, one device to itself over its link-local GID, then at
# netdev MTU 9000 in verbs_odp's "aligned" geometry (every transfer, packet,
# UD payload and atomic result at a page boundary, path MTU 4096). No page
# is ever pinned: sroce's pinned_pages does not move while ODP MRs are in
# use (checked by the program) and the system-wide nr_foll_pin_acquired
# grows by fewer pages than a run moves. A program that exits with ODP MRs
# registered and QPs connected leaves nothing pinned or referenced. sroce's
# counters odp_page_faults, odp_fault_errors and odp_invalidations must move
# on both devices. Runs for rxe too (SROCE_TESTS_TYPE=rxe, on a kernel with
# CONFIG_INFINIBAND_ON_DEMAND_PAGING), as the reference, but only in the
# aligned geometry: rxe (7.3) copies ODP data from and to the start of the
# page, whatever the offset in it, and does not advance the other side's
# pointer past a page (__rxe_odp_mr_copy), so at path MTU 1024, at an offset
# or across pages it misplaces bytes. What rxe lacks or does differently is
# a note: the ODP counters, a count of its pinned pages, and (verbs_odp's
# "rxe" argument) a SEND from unmapped memory completing as flushed, not
# LOC_PROT_ERR.
# timeout: 900
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

two_devices
on_exit del_all_links

# The checks only sroce is held to are notes in the reference run, which
# runs only the aligned geometry (see above).
ref=()
[[ $LINK_TYPE == sroce ]] || ref=(rxe aligned)
verbs_odp() { checks_pass verbs_odp "$@"; }

# mtu_9000: the veth pair at MTU 9000, both ports at active MTU 4096.
mtu_9000() {
	local dev
	in_h1 ip link set v1 mtu 9000
	in_h2 ip link set v2 mtu 9000
	for dev in "$DEV1" "$DEV2"; do
		retry 10 bash -c "ibv_devinfo -d $dev | grep -Eq 'active_mtu:[[:space:]]+4096 '" ||
			fail "$dev: active_mtu is not 4096 at netdev MTU 9000"
	done
}
[[ $LINK_TYPE == sroce ]] || mtu_9000

# odp_caps HEADING: the flags ibv_devinfo -v prints under HEADING (a line
# with one tab, the flags below it with more), one a line.
odp_caps() {
	awk -v h="$1:" '$1 == h { on = 1; next }
		on && /^\t[^\t]/ { on = 0 }
		on { sub(/^[[:space:]]+/, ""); print }' <<<"$info"
}
for dev in "$DEV1" "$DEV2"; do
	info=$(ibv_devinfo -v -d "$dev")
	general=$(odp_caps general_odp_caps) rc=$(odp_caps rc_odp_caps) ud=$(odp_caps ud_odp_caps)
	log "$dev: general_odp_caps: $(tr '\n' ' ' <<<"$general")| rc_odp_caps: $(tr '\n' ' ' <<<"$rc")| ud_odp_caps: $(tr '\n' ' ' <<<"$ud")"
	grep -qx ODP_SUPPORT <<<"$general" || fail "ibv_devinfo -v -d $dev: no ODP_SUPPORT under general_odp_caps"
	for f in SUPPORT_SEND SUPPORT_RECV SUPPORT_WRITE SUPPORT_READ SUPPORT_ATOMIC SUPPORT_SRQ; do
		grep -qx "$f" <<<"$rc" || fail "ibv_devinfo -v -d $dev: no $f under rc_odp_caps"
	done
	for f in SUPPORT_SEND SUPPORT_RECV; do
		grep -qx "$f" <<<"$ud" || fail "ibv_devinfo -v -d $dev: no $f under ud_odp_caps"
	done
done

# nr_foll_pin_acquired, system-wide (empty if the kernel has none).
foll_pins_acquired() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null || true
	awk '$1 == "nr_foll_pin_acquired" { print $2 }' /proc/vmstat
}

refs() { cat "/sys/module/$MOD_NAME/refcnt"; }
sroce_pins_released "before the ODP programs"
before_refs=$(refs)
declare -A faults0 errs0 inval0
for dev in "$DEV1" "$DEV2"; do
	faults0[$dev]=$(hw_counter_or_0 "$dev" odp_page_faults) errs0[$dev]=$(hw_counter_or_0 "$dev" odp_fault_errors)
	inval0[$dev]=$(hw_counter_or_0 "$dev" odp_invalidations)
done
acq0=$(foll_pins_acquired)
verbs_odp "$DEV1" "$G1" "$DEV2" "$G2" "${ref[@]}"
acq1=$(foll_pins_acquired)
# A run's 1 MiB SENDs, WRITEs and READs alone move 1024 pages through ODP
# memory; other I/O in the VM (9p) may pin a few pages meanwhile.
if [[ -n $acq0 && -n $acq1 ]]; then
	log "nr_foll_pin_acquired +$((acq1 - acq0)) during the run"
	((acq1 - acq0 < 1024)) || fail "nr_foll_pin_acquired grew by $((acq1 - acq0)) during a run of ODP transfers"
else
	log "no nr_foll_pin_acquired in /proc/vmstat: not checked"
fi

# A (DEV1) faulted its sources, destinations and result buffers in, failed
# to fault unmapped ones and dropped pages; so did B (DEV2), the target.
odp_counters_moved() {
	local dev f e i
	for dev in "$DEV1" "$DEV2"; do
		for f in odp_page_faults odp_fault_errors odp_invalidations; do
			[[ -r /sys/class/infiniband/$dev/ports/1/hw_counters/$f ]] || fail "$dev has no counter $f"
		done
		f=$(($(hw_counter_or_0 "$dev" odp_page_faults) - ${faults0[$dev]}))
		e=$(($(hw_counter_or_0 "$dev" odp_fault_errors) - ${errs0[$dev]}))
		i=$(($(hw_counter_or_0 "$dev" odp_invalidations) - ${inval0[$dev]}))
		log "$dev: odp_page_faults +$f, odp_fault_errors +$e, odp_invalidations +$i"
		((f > 0 && e > 0 && i > 0)) ||
			fail "$dev: ODP counters did not move: odp_page_faults +$f, odp_fault_errors +$e, odp_invalidations +$i"
	done
}
if [[ $LINK_TYPE == sroce ]]; then
	odp_counters_moved
else
	note "$LINK_TYPE has no ODP counters: not checked"
fi

verbs_odp "$DEV2" "$G2" "$DEV1" "$G1" "${ref[@]}"
if [[ $LINK_TYPE == sroce ]]; then
	ll=$(gid_table "$DEV1" | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
	[[ -n $ll ]] || fail "no link-local RoCE v2 GID on $DEV1"
	verbs_odp "$DEV1" "$ll" "$DEV1" "$ll"
	# What the reference run checks, at path MTU 4096.
	mtu_9000
	verbs_odp "$DEV1" "$G1" "$DEV2" "$G2" aligned
fi
sroce_pins_released "after the ODP programs"

# Exiting with ODP MRs registered (one over memory unmapped since) and QPs
# connected frees them: nothing pinned, the module's reference count back.
verbs_odp "$DEV1" "$G1" "$DEV2" "$G2" "${ref[@]}" leave
sroce_pins_released "after a program exited with ODP MRs registered"
retry 5 bash -c "(( \$(cat /sys/module/$MOD_NAME/refcnt) == $before_refs ))" || true
assert_eq "$before_refs" "$(refs)" "module reference count after the programs exited"
