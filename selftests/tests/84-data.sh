#!/bin/bash
# The bytes the RC data path moves, checked by selftests/progs/verbs_data
# between two sroce devices (one process drives both: rdma devices are
# visible from every namespace in shared mode; the packets cross v1 <-> v2):
# WRITE (with and without immediate, multi-packet), READ, atomics, SEND with
# several SGEs, SRQ receives and the SRQ limit event, and the error
# completions with the QP's state and the flushes that follow. Also over
# the IPv6 link-local GIDs (index 0), and the multi-packet messages leave
# as UDP-segmented datagrams (sent_segmented) both ways.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
two_devices
g1=$G1 g2=$G2

# COUNTER summed over both devices.
both() {
	echo $(($(cat "/sys/class/infiniband/sroce1/ports/1/hw_counters/$1") +
		$(cat "/sys/class/infiniband/sroce2/ports/1/hw_counters/$1")))
}
segmented() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/sent_segmented"; }
seg1=$(segmented sroce1) seg2=$(segmented sroce2) icrc0=$(both rcvd_icrc_err)
before=$(cat "/sys/module/$MOD_NAME/refcnt")
# Twice: a leak of the first run (budgets, pinned pages, references)
# shows in the second. Each way round, so both devices are requester and
# responder; then once more over IPv6.
for run in "sroce1 $g1 sroce2 $g2" "sroce2 $g2 sroce1 $g1" "sroce1 0 sroce2 0"; do
	read -ra args <<<"$run"
	seg_run=$(both sent_segmented)
	rc=0
	out=$(in_h1 timeout 200 "$SROCE_BIN/verbs_data" "${args[@]}" 2>&1) || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "verbs_data $run exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
	assert_contains "$out" "all checks passed" "verbs_data $run"
	log "verbs_data $run: $(grep -c '^ok' <<<"$out") checks passed"
	(($(both sent_segmented) > seg_run)) || fail "verbs_data $run sent no segmented datagram"
done
# Every piece of a segmented datagram arrived with a valid ICRC (a wrong
# one would be dropped and resent, and the data could still check out).
assert_eq "$(both rcvd_icrc_err)" "$icrc0" "ICRC errors counted by the devices"
(($(segmented sroce1) > seg1)) || fail "sroce1 sent no segmented datagram"
(($(segmented sroce2) > seg2)) || fail "sroce2 sent no segmented datagram"
log "segmented datagrams sent: sroce1 $(($(segmented sroce1) - seg1)), sroce2 $(($(segmented sroce2) - seg2))"
assert_eq "$before" "$(cat "/sys/module/$MOD_NAME/refcnt")" \
	"module reference count after verbs_data exited"
del_link sroce1
del_link sroce2
unload_sroce
! module_loaded "$MOD_NAME" || fail "module still loaded after verbs_data"
