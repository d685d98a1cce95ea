#!/bin/bash
# ACKs that arrive in bursts: netem's slot mode holds the responder's
# packets and releases them together, so the ACKs of most of a window of
# messages reach the requester at once (as interrupt coalescing or GRO
# delivers them on real NICs). perftest signals one WQE in 100 and keeps
# 128 posted, more than the requester's window of 32: a requester that
# frees window slots in a pass and does not go back to the send ring for
# them waits for a doorbell that never comes (seen as ib_write_bw -s 4096
# stopping half-way on a busy machine, when the whole window's ACKs were
# taken in one pass; this test does not force that exact timing, it keeps
# bursts of ACKs covered). Each run must finish with its result line.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2
on_exit del_all_links

# The responder (h1) sends the ACKs: its egress releases them every
# 250 ms, long enough for the requester to fill its window (32 one-packet
# messages) meanwhile, so each burst retires a whole window.
in_ns h1 tc qdisc replace dev v1 root netem slot 250ms 250ms || fail "tc netem slot on v1"
on_exit "in_ns h1 tc qdisc del dev v1 root"
# Unbound work items (sroce's QP work) on CPU 0 only, where the netem
# timer that releases a burst fires (it was armed by that work), and the
# tools on CPU 1: a burst is received in one softirq run before the QP's
# work item can take any of it, so one pass sees all of its ACKs.
wq_mask=/sys/devices/virtual/workqueue/cpumask
if [[ -w $wq_mask ]] && (($(nproc) >= 2)); then
	old_mask=$(cat "$wq_mask")
	echo 1 >"$wq_mask" || fail "cannot set $wq_mask"
	on_exit "echo $old_mask >$wq_mask"
	PIN=(taskset -c 1)
	log "unbound work on CPU 0 (was $old_mask), tools on CPU 1"
else
	PIN=()
fi

bw() { # TOOL SIZE ITERS: perftest with its default depth (128) and signalling
	run_pair h1 "${PIN[*]} $1 -d $DEV1 -x $g1 -m 1024 -n $3 -s $2 -F" \
		h2 "${PIN[*]} $1 -d $DEV2 -x $g2 -m 1024 -n $3 -s $2 -F 10.77.1.1"
	log "$1 -s $2: $(grep -E "^ *$2 +$3 " <<<"$CLIENT_OUT")"
	assert_perftest_row "$2" "$3" "$1 -s $2 -n $3 with ACKs in bursts"
}

bw ib_write_bw 1024 400
bw ib_send_bw 1024 400
bw ib_write_bw 64 400
