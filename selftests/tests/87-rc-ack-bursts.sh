#!/bin/bash
# ACKs that arrive in bursts: netem's slot mode holds the responder's
# packets and releases them together, so the ACKs of a whole window of
# messages reach the requester at once. perftest signals one WQE in 100 and
# keeps 128 posted: a requester that frees its whole window in one pass and
# does not go back to the send ring waits forever for a doorbell that
# never comes (seen as ib_write_bw -s 4096 stopping half-way on a busy
# machine). Each run must finish with its result line.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2
on_exit del_all_links

# The responder (h1) sends the ACKs: its egress releases them in slots.
in_ns h1 tc qdisc replace dev v1 root netem slot 20ms 20ms || fail "tc netem slot on v1"
on_exit "in_ns h1 tc qdisc del dev v1 root"

bw() { # TOOL SIZE ITERS: perftest with its default depth (128) and signalling
	run_pair h1 "$1 -d $DEV1 -x $g1 -m 1024 -n $3 -s $2 -F" \
		h2 "$1 -d $DEV2 -x $g2 -m 1024 -n $3 -s $2 -F 10.77.1.1"
	log "$1 -s $2: $(grep -E "^ *$2 +$3 " <<<"$CLIENT_OUT")"
	assert_match "$CLIENT_OUT" "^ *$2 +$3 +$PERF_NUM +$PERF_NUM" "$1 -s $2 -n $3 with ACKs in bursts"
}

for round in 1 2 3; do
	log "round $round"
	bw ib_write_bw 4096 1000
	bw ib_send_bw 4096 1000
	bw ib_write_bw 64 2000
done
