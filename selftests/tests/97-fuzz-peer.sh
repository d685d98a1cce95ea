#!/bin/bash
# A hostile peer. A live RC QP pair (selftests/progs/rc_hold: B on sroce2
# reads a buffer of A on sroce1) is sent forged packets from h2 through raw
# sockets (selftests/progs/roce_pkt.py):
# - 100 duplicates of B's 1 MiB RDMA READ (1024 response packets at path MTU
#   1024) back to back: they coalesce with the queued replay instead of each
#   replaying the whole READ (that was 101 x 1024 packets), the QP still
#   works (a second READ's bytes are intact) and closes promptly;
# - 10^5 malformed and semi-valid RoCEv2 packets (truncated, bad opcodes,
#   pad counts, P_Keys, PSNs outside the window, READs with huge lengths,
#   ACKs and READ responses for PSNs never sent, forged QPNs, duplicates of
#   the READ, bad ICRCs; the last 1000 garbage at the expected PSN, which may
#   move the QP to the error state): afterwards the live QP is torn down,
#   the counters moved, no page stays pinned, and the devices still move
#   data (verbs_data). The harness checks the kernel log.
# timeout: 600
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "forges packets at sroce's QPs"
two_devices

PKT=$SELFTESTS_DIR/progs/roce_pkt.py
LEN=$((1 << 20))
MTU=1024
PACKETS=$((LEN / MTU))
DUPS=100

# wait_counter DEV NAME VALUE: until the counter reaches at least VALUE
# (packets are asynchronous); fails after 60 s.
wait_counter() {
	local deadline=$((SECONDS + 60)) got
	while :; do
		got=$(hw_counter "$1" "$2")
		((got >= $3)) && return 0
		((SECONDS < deadline)) || fail "$1 $2 is $got, expected at least $3"
		sleep 0.2
	done
}

# field NAME: NAME=VALUE from rc_hold's "read" line.
field() { sed -n "s/^read .*\b$1=\([^ ]*\).*/\1/p" "$TEST_TMP/hold.log"; }

ctl=$TEST_TMP/ctl
mkdir -p "$ctl"
bg_in h1 "$TEST_TMP/hold.log" "$SROCE_BIN/rc_hold" "$DEV1" "$G1" "$DEV2" "$G2" "$LEN" "$ctl"
hold=$BG_PID
retry 60 grep -q '^read ' "$TEST_TMP/hold.log" || {
	cat "$TEST_TMP/hold.log"
	fail "rc_hold did not connect and read"
}
qpn=$(field qpn_a) psn=$(field psn) va=$(field va) rkey=$(field rkey)
log "live QP $qpn on $DEV1; READ psn=$psn va=$va rkey=$rkey len=$LEN"
rdma resource show qp | grep -q "lqpn $qpn " || fail "QP $qpn not in rdma resource show qp"

# ------------------------------------------------ duplicate READ amplification
log "$DUPS forged duplicates of the $PACKETS-packet READ"
sent0=$(hw_counter "$DEV1" sent_pkts)
dup0=$(hw_counter "$DEV1" duplicate_request)
in_h2 python3 "$PKT" dupread 10.77.1.2 10.77.1.1 --qpn "$qpn" --psn "$psn" \
	--va "$va" --rkey "$rkey" --len "$LEN" --count "$DUPS"
# Some duplicates may be lost on the way (socket buffers); the rest are
# taken once the replay they coalesce with is out.
wait_counter "$DEV1" duplicate_request $((dup0 + 1))
# The QP still works: B's next READ (after the replayed responses, in PSN
# order) returns the new bytes.
touch "$ctl/check"
retry 60 grep -q '^check ' "$TEST_TMP/hold.log" || fail "second READ did not complete"
assert_contains "$(cat "$TEST_TMP/hold.log")" "check ok" "second READ after the duplicates"
dups=$(($(hw_counter "$DEV1" duplicate_request) - dup0))
sent=$(($(hw_counter "$DEV1" sent_pkts) - sent0))
log "$dups duplicates taken; $DEV1 sent $sent packets (the second READ's $PACKETS included)"
# Without coalescing every duplicate replays all PACKETS responses. With it,
# duplicates that arrive while a replay is queued only move it back: the
# 100 come back to back, within a small part of one replay's time.
((sent <= PACKETS + dups * PACKETS / 4)) ||
	fail "$dups duplicate READs made $DEV1 send $sent packets"
((sent >= PACKETS)) || fail "the second READ's responses are missing ($sent sent)"

# ------------------------------------------------------------------ fuzz
rcvd0=$(hw_counter "$DEV1" rcvd_pkts)
icrc0=$(hw_counter "$DEV1" rcvd_icrc_err)
noqp0=$(hw_counter "$DEV1" rcvd_drop_no_qp)
bad0=$(($(hw_counter "$DEV1" rcvd_drop_short) + $(hw_counter "$DEV1" rcvd_drop_malformed)))
dup0=$(hw_counter "$DEV1" duplicate_request)
epsn=$((psn + 2 * PACKETS))
log "10^5 malformed and semi-valid packets at $DEV1 (QP $qpn expects PSN $epsn)"
out=$(in_h2 python3 "$PKT" fuzz 10.77.1.2 10.77.1.1 --qpn "$qpn" --epsn "$epsn" \
	--count 100000 --read-psn "$psn" --va "$va" --rkey "$rkey" --len "$LEN" --mtu "$MTU")
log "$out"
assert_match "$out" '^fuzz sent 100000 packets' "fuzz"
# Received (or dropped at a full queue) and counted: some of each kind.
wait_counter "$DEV1" rcvd_icrc_err $((icrc0 + 1))
wait_counter "$DEV1" rcvd_drop_no_qp $((noqp0 + 1))
wait_counter "$DEV1" duplicate_request $((dup0 + 1))
rcvd=$(($(hw_counter "$DEV1" rcvd_pkts) - rcvd0))
bad=$(($(hw_counter "$DEV1" rcvd_drop_short) + $(hw_counter "$DEV1" rcvd_drop_malformed) - bad0))
log "$DEV1: rcvd_pkts +$rcvd, icrc errors +$(($(hw_counter "$DEV1" rcvd_icrc_err) - icrc0)), short or malformed +$bad, no QP +$(($(hw_counter "$DEV1" rcvd_drop_no_qp) - noqp0)), duplicates +$(($(hw_counter "$DEV1" duplicate_request) - dup0))"
((rcvd > 0)) || fail "rcvd_pkts did not move"
((bad > 0)) || fail "no short or malformed packet was counted"

# The live QP closes promptly, whatever state the fuzz left it in.
touch "$ctl/exit"
retry 60 grep -q '^closed' "$TEST_TMP/hold.log" || {
	cat "$TEST_TMP/hold.log"
	fail "rc_hold did not close its QPs"
}
rc=0
wait "$hold" || rc=$?
cat "$TEST_TMP/hold.log"
((rc == 0)) || fail "rc_hold exited $rc"
retry 30 bash -c "! rdma resource show qp | grep -q 'lqpn $qpn '" ||
	fail "QP $qpn still listed after rc_hold exited"
sroce_pins_released "after rc_hold exited"

# ------------------------------------------------- the devices still work
rc=0
out=$(in_h1 timeout 200 "$SROCE_BIN/verbs_data" "$DEV1" "$G1" "$DEV2" "$G2" 2>&1) || rc=$?
printf '%s\n' "$out" | tail -5
((rc == 0)) || fail "verbs_data after the fuzz exited $rc"
assert_contains "$out" "all checks passed" "verbs_data after the fuzz"
sroce_pins_released "after verbs_data"
