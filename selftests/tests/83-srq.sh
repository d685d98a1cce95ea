#!/bin/bash
# RC receives from a shared receive queue: ibv_srq_pingpong (stock
# rdma-core through the rxe provider) between two sroce devices, several
# QPs sharing one SRQ on each side, single- and multi-packet messages.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
two_devices
g1=$G1 g2=$G2

# Server on sroce1 (h1), client on sroce2 (h2). -r is the SRQ depth; each
# QP keeps one message in flight, so the depth must cover all QPs.
for args in "-q 4 -s 1" "-q 4 -s 4096" "-q 3 -s 10000" "-q 8 -s 64"; do
	run_pair h1 "ibv_srq_pingpong -d sroce1 -g $g1 -n 10 -m 1024 -r 32 $args" \
		h2 "ibv_srq_pingpong -d sroce2 -g $g2 -n 10 -m 1024 -r 32 $args 10.77.1.1"
	assert_match "$CLIENT_OUT" "bytes in .* seconds = .*Mbit/sec" "throughput line ($args)"
	assert_match "$CLIENT_OUT" "10 iters in" "ibv_srq_pingpong $args"
done
