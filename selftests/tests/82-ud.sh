#!/bin/bash
# The UD data path between two sroce devices (stock rdma-core through the
# rxe provider): ibv_ud_pingpong with payload validation at several sizes
# up to the port MTU, both directions, and perftest's UD ib_send_bw and
# ib_send_lat; a datagram larger than the MTU is refused by the tools'
# own checks, so the kernel's length error is covered by verbs tests.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
two_devices
g1=$G1 g2=$G2
rcvd0=$(hw_counter sroce1 rcvd_pkts)

# ibv_ud_pingpong's size is the payload; the GRH comes on top of it in the
# receive buffer. MTU 1024 (veth 1500).
for size in 1 512 1024; do
	run_pair h1 "ibv_ud_pingpong -d sroce1 -g $g1 -n 50 -s $size -c" \
		h2 "ibv_ud_pingpong -d sroce2 -g $g2 -n 50 -s $size -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "50 iters in" "ibv_ud_pingpong -s $size (sroce1 serving)"
	run_pair h2 "ibv_ud_pingpong -d sroce2 -g $g2 -n 50 -s $size -c" \
		h1 "ibv_ud_pingpong -d sroce1 -g $g1 -n 50 -s $size -c 10.77.1.2"
	assert_match "$CLIENT_OUT" "50 iters in" "ibv_ud_pingpong -s $size (sroce2 serving)"
done

if command -v ib_send_bw >/dev/null; then
	for size in 64 1024; do
		run_pair h1 "ib_send_bw -d sroce1 -x $g1 -c UD -n 200 -s $size -F" \
			h2 "ib_send_bw -d sroce2 -x $g2 -c UD -n 200 -s $size -F 10.77.1.1"
		assert_match "$CLIENT_OUT" "^ *$size +200 +[0-9.]+" "ib_send_bw -c UD -s $size"
	done
	run_pair h1 "ib_send_lat -d sroce1 -x $g1 -c UD -n 100 -s 64 -F" \
		h2 "ib_send_lat -d sroce2 -x $g2 -c UD -n 100 -s 64 -F 10.77.1.1"
	assert_perftest_row 64 100 "ib_send_lat -c UD"
fi

rcvd1=$(hw_counter sroce1 rcvd_pkts)
log "sroce1 rcvd_pkts $rcvd0 -> $rcvd1, rcvd_drop_bad_qkey $(hw_counter sroce1 rcvd_drop_bad_qkey)"
((rcvd1 - rcvd0 >= 300)) || fail "sroce1 received only $((rcvd1 - rcvd0)) packets"
