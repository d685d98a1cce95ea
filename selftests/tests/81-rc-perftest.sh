#!/bin/bash
# RDMA WRITE and READ between two sroce devices with perftest (stock
# rdma-core through the rxe provider); the 64 KiB messages leave as
# UDP-segmented datagrams (the WRITEs from the requester, the READ
# responses from the responder), each packet counted once; with the module
# parameter udp_segmentation=0 every packet leaves alone.
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2

# Packets sroce2 sent and sroce1 received since the marks sent2 and rcvd1
# are equal (none lost on a veth pair, none doubled by segmentation), once
# the receive softirq took what the last send queued.
counts_match() {
	(($(hw_counter sroce2 sent_pkts) - sent2 == $(hw_counter sroce1 rcvd_pkts) - rcvd1))
}
check_counts() {
	retry 5 counts_match ||
		fail "sroce2 sent $(($(hw_counter sroce2 sent_pkts) - sent2)) packets, sroce1 received $(($(hw_counter sroce1 rcvd_pkts) - rcvd1)) ($1)"
}
seg1=$(hw_counter sroce1 sent_segmented) seg2=$(hw_counter sroce2 sent_segmented)
sent2=$(hw_counter sroce2 sent_pkts) rcvd1=$(hw_counter sroce1 rcvd_pkts)

run_pair h1 "ib_write_bw -d sroce1 -x $g1 -n 5 -s 65536 -F" \
	h2 "ib_write_bw -d sroce2 -x $g2 -n 5 -s 65536 -F 10.77.1.1"
log "ib_write_bw client: $(grep -E '^ *65536 ' <<<"$CLIENT_OUT")"
assert_match "$CLIENT_OUT" '^ *65536 +5 +[0-9.]+ +[0-9.]+' "ib_write_bw result line"
(($(hw_counter sroce2 sent_segmented) > seg2)) || fail "the WRITE requester sent no segmented datagram"
check_counts "segmented"

run_pair h1 "ib_read_bw -d sroce1 -x $g1 -n 5 -s 65536 -F" \
	h2 "ib_read_bw -d sroce2 -x $g2 -n 5 -s 65536 -F 10.77.1.1"
log "ib_read_bw client: $(grep -E '^ *65536 ' <<<"$CLIENT_OUT")"
assert_match "$CLIENT_OUT" '^ *65536 +5 +[0-9.]+ +[0-9.]+' "ib_read_bw result line"
(($(hw_counter sroce1 sent_segmented) > seg1)) || fail "the READ responder sent no segmented datagram"
log "segmented datagrams: sroce2 (WRITE) $(($(hw_counter sroce2 sent_segmented) - seg2)), sroce1 (READ responses) $(($(hw_counter sroce1 sent_segmented) - seg1))"

# udp_segmentation=0: every packet alone, still counted once each.
del_link sroce1
del_link sroce2
unload_sroce
insmod "$MOD_KO" udp_segmentation=0 || fail "insmod $MOD_KO udp_segmentation=0"
link_devices
sent2=$(hw_counter sroce2 sent_pkts) rcvd1=$(hw_counter sroce1 rcvd_pkts)
run_pair h1 "ib_write_bw -d sroce1 -x $G1 -n 5 -s 65536 -F" \
	h2 "ib_write_bw -d sroce2 -x $G2 -n 5 -s 65536 -F 10.77.1.1"
assert_match "$CLIENT_OUT" '^ *65536 +5 +[0-9.]+ +[0-9.]+' "ib_write_bw result line (udp_segmentation=0)"
assert_eq "$(hw_counter sroce2 sent_segmented)" 0 "segmented datagrams with udp_segmentation=0"
check_counts "udp_segmentation=0"
