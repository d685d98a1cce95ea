#!/bin/bash
# The first end-to-end data path: RC SEND/RECV between two sroce devices,
# driven by stock rdma-core (ibv_rc_pingpong through the rxe provider):
# single-packet, page-sized and multi-packet messages (path MTU 1024),
# payloads validated (-c), packets counted by the port counters, and the
# lone packets of a ping-pong handled in the receive softirq, the pieces
# of a segmented datagram in one pass.
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
two_devices
g1=$G1 g2=$G2
log "RoCE v2 GID index for 10.77.1.1 on sroce1: $g1, for 10.77.1.2 on sroce2: $g2"

sent0=$(hw_counter sroce1 sent_pkts)
rcvd0=$(hw_counter sroce1 rcvd_pkts)
# Where sroce1's received packets went: "received handled-in-softirq
# handed-to-worker dropped", read until two reads agree (a late packet may
# arrive between the files).
paths() {
	local a b
	b=$(paths_once)
	while a=$b && b=$(paths_once) && [[ $a != "$b" ]]; do sleep 0.1; done
	echo "$b"
}
paths_once() {
	echo "$(hw_counter sroce1 rcvd_pkts) $(hw_counter sroce1 rcvd_softirq_passes)" \
		"$(hw_counter sroce1 rcvd_worker_handoffs)" \
		"$(($(hw_counter sroce1 rcvd_drop_no_qp) + $(hw_counter sroce1 rcvd_drop_qp_full)))" \
		"$(hw_counter sroce1 rcvd_held)"
}
read -r r0 soft0 hand0 drop0 held0 < <(paths)

# Server on sroce1 (h1), client on sroce2 (h2).
for size in 1 4096 100000; do
	run_pair h1 "ibv_rc_pingpong -d sroce1 -g $g1 -n 5 -s $size -m 1024 -c" \
		h2 "ibv_rc_pingpong -d sroce2 -g $g2 -n 5 -s $size -m 1024 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "bytes in .* seconds = .*Mbit/sec" "throughput line (-s $size)"
	assert_match "$CLIENT_OUT" "5 iters in" "ibv_rc_pingpong -s $size"
done

sleep 0.1
sent1=$(hw_counter sroce1 sent_pkts)
rcvd1=$(hw_counter sroce1 rcvd_pkts)
log "sroce1 sent_pkts $sent0 -> $sent1, rcvd_pkts $rcvd0 -> $rcvd1"
# 100000 bytes at MTU 1024 is 98 packets per message; each side sends
# several such messages.
((sent1 - sent0 >= 2 * 98)) || fail "sroce1 sent only $((sent1 - sent0)) packets"
((rcvd1 - rcvd0 >= 2 * 98)) || fail "sroce1 received only $((rcvd1 - rcvd0)) packets"
read -r r1 soft1 hand1 drop1 held1 < <(paths)
rcvd=$((r1 - r0)) soft=$((soft1 - soft0)) hand=$((hand1 - hand0)) drop=$((drop1 - drop0))
held=$((held1 - held0))
log "sroce1 rcvd_pkts +$rcvd: rcvd_softirq_passes +$soft (rcvd_held +$held), rcvd_worker_handoffs +$hand, dropped +$drop"
# Every received packet went one of these ways.
((soft + hand + drop == rcvd)) ||
	fail "softirq passes + worker handoffs + drops ($soft + $hand + $drop) != packets received ($rcvd)"
# A ping-pong's packets mostly arrive alone, at an idle QP.
((soft > 0)) || fail "no received packet was handled in the receive softirq"
# The 100000-byte SENDs leave as UDP-segmented datagrams: their pieces
# wait for the pass their datagram's last piece runs (one pass a burst).
((held > 0 && held <= soft)) ||
	fail "rcvd_held +$held: pieces of segmented datagrams held for one pass (want 1..$soft)"
