#!/bin/bash
# Unsignaled SENDs and WRITEs share an ACK: their last packets ask for one
# only every 16 messages (or a quarter of the PSN window), signaled ones
# always (docs/performance.md). A perftest stream signalling one WQE in 100
# then draws a fraction of the ACKs; one signalling every WQE draws one
# each, as rxe's requester asks. Unsignaled WRITEs with nothing after them
# are acknowledged by asking once more after a 1 ms wait (counter
# ack_requests), before the transport timer (set to 17 s here) would
# resend them.
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's requester"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2

# ib_write_bw of N 64-byte WRITEs from sroce2 to sroce1 with CQ moderation
# MOD. Every packet sroce1 (the responder) sends has a cause: a new packet
# that asked (the 16th unsignaled message since the last that asked, or a
# signaled one: at most N/16 + N/MOD + 2), an ACK request after a wait
# (ack_requests: a new packet made to ask, or the newest sent again) or a
# packet sent again after a loss (retransmitted_pkts, each may ask), or a
# sequence NAK (out_of_seq_request). ACKS: what sroce1 sent; BOUND: that.
write_bw_acks() {
	local n=$1 mod=$2 sent asked resent naks
	sent=$(hw_counter sroce1 sent_pkts) asked=$(hw_counter sroce2 ack_requests)
	resent=$(hw_counter sroce2 retransmitted_pkts) naks=$(hw_counter sroce1 out_of_seq_request)
	run_pair h1 "ib_write_bw -d sroce1 -x $g1 -n $n -s 64 -Q $mod -F" \
		h2 "ib_write_bw -d sroce2 -x $g2 -n $n -s 64 -Q $mod -F 10.77.1.1"
	assert_perftest_row 64 "$n" "ib_write_bw -n $n -Q $mod result line"
	ACKS=$(($(hw_counter sroce1 sent_pkts) - sent))
	asked=$(($(hw_counter sroce2 ack_requests) - asked))
	resent=$(($(hw_counter sroce2 retransmitted_pkts) - resent))
	naks=$(($(hw_counter sroce1 out_of_seq_request) - naks))
	BOUND=$((n / 16 + n / mod + 2 + asked + resent + naks))
	log "ib_write_bw -n $n -Q $mod: sroce1 sent $ACKS packets; sroce2 asked after a pause $asked times, resent $resent; sroce1 sent $naks sequence NAKs"
}

write_bw_acks 3000 100
((ACKS >= 30 && ACKS <= BOUND)) ||
	fail "one WQE in 100 signaled drew $ACKS ACKs for 3000 WRITEs (want 30..$BOUND)"
write_bw_acks 300 1
((ACKS >= 300)) || fail "300 signaled WRITEs drew $ACKS ACKs (want one each)"

# Five unsignaled WRITEs and a pause: asked for once, no timeout.
asked=$(hw_counter sroce2 ack_requests) timeouts=$(hw_counter sroce2 local_ack_timeout_err)
SROCE_QP_TIMEOUT=22 bg_in - "$TEST_TMP/tail.log" "$SROCE_BIN/rc_tail" sroce2 "$g2" sroce1 "$g1" 5 $((3 * SCALE))
tail_pid=$BG_PID
retry 20 grep -q '^paused' "$TEST_TMP/tail.log" || fail "rc_tail did not post: $(cat "$TEST_TMP/tail.log")"
retry 3 test "$(hw_counter sroce2 ack_requests)" -gt "$asked" ||
	fail "the 5 unsignaled WRITEs were not asked about during the pause"
rc=0
wait "$tail_pid" || rc=$?
cat "$TEST_TMP/tail.log"
((rc == 0)) || fail "rc_tail failed ($rc)"
assert_eq 1 "$(($(hw_counter sroce2 ack_requests) - asked))" "ACK requests for one paused tail"
assert_eq 0 "$(($(hw_counter sroce2 local_ack_timeout_err) - timeouts))" "transport timeouts"
