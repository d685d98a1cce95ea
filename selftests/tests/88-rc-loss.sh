#!/bin/bash
# RC on a lossy wire: tc netem drops, reorders, duplicates and corrupts
# packets on both hosts' links while stock rdma-core moves data; every
# message must arrive intact (ibv_rc_pingpong -c and the verbs_data
# program check the bytes, perftest the completions), and the transport counters that recover from
# the faults must have moved. Runs for rxe too (SROCE_TESTS_TYPE=rxe), as
# the reference.
# timeout: 420
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2
on_exit del_all_links

# sum NAME: the counter on both devices.
sum() { echo $(($(hw_counter_or_0 "$DEV1" "$1") + $(hw_counter_or_0 "$DEV2" "$1"))); }

# netem ARGS...: the same impairment on both links' egress (replacing any).
netem() {
	local n
	for n in 1 2; do
		in_ns "h$n" tc qdisc replace dev "v$n" root netem "$@" ||
			fail "tc netem $* on v$n"
	done
	log "netem on v1 and v2: $*"
}
clear_netem() {
	local n
	for n in 1 2; do in_ns "h$n" tc qdisc del dev "v$n" root 2>/dev/null || true; done
}
on_exit clear_netem

pingpong() { # SIZE ITERS: payload-checked ping-pong, sroce1 serving
	run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $g1 -n $2 -s $1 -m 1024 -c" \
		h2 "ibv_rc_pingpong -d $DEV2 -g $g2 -n $2 -s $1 -m 1024 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "$2 iters in" "ibv_rc_pingpong -s $1 -n $2 under '$CASE'"
}
write_bw() {
	run_pair h1 "ib_write_bw -d $DEV1 -x $g1 -n 100 -s 65536 -F" \
		h2 "ib_write_bw -d $DEV2 -x $g2 -n 100 -s 65536 -F 10.77.1.1"
	assert_match "$CLIENT_OUT" '^ *65536 +100 +[0-9.]+ +[0-9.]+' "ib_write_bw under '$CASE'"
}
read_bw() {
	run_pair h1 "ib_read_bw -d $DEV1 -x $g1 -n 100 -s 65536 -F" \
		h2 "ib_read_bw -d $DEV2 -x $g2 -n 100 -s 65536 -F 10.77.1.1"
	assert_match "$CLIENT_OUT" '^ *65536 +100 +[0-9.]+ +[0-9.]+' "ib_read_bw under '$CASE'"
}

for CASE in "loss 1%" "loss 5%" "delay 1ms reorder 25% 50%" "duplicate 5%" "corrupt 1%"; do
	# shellcheck disable=SC2086 # CASE is netem's argument list
	netem $CASE
	LOSSY_WIRE=0
	[[ $CASE == loss* || $CASE == corrupt* ]] && LOSSY_WIRE=1
	before_retx=$(sum retransmitted_pkts)
	before_dup=$(sum duplicate_request)
	pingpong 4096 200
	pingpong 100000 20
	write_bw
	read_bw
	if [[ $LINK_TYPE == sroce ]]; then
		# The byte-checking program (without its error cases: a lost
		# fatal NAK leaves a requester retrying).
		rc=0
		out=$(VERBS_DATA_LOSSY=1 timeout 300 "$SROCE_BIN/verbs_data" "$DEV1" "$g1" "$DEV2" "$g2" 2>&1) || rc=$?
		{ grep -E '^FAIL|got wr_id|no completion' <<<"$out" || true; } | head -10 | sed 's/^/#   /'
		((rc == 0)) || fail "verbs_data under '$CASE' exited $rc"
		assert_contains "$out" "all checks passed" "verbs_data under '$CASE'"
	fi
	retx=$(($(sum retransmitted_pkts) - before_retx))
	dup=$(($(sum duplicate_request) - before_dup))
	log "'$CASE': retransmitted_pkts +$retx, duplicate_request +$dup," \
		"local_ack_timeout_err $(sum local_ack_timeout_err), out_of_seq_request $(sum out_of_seq_request)," \
		"rcvd_icrc_err $(sum rcvd_icrc_err)"
	if [[ $LINK_TYPE == sroce ]]; then
		case $CASE in
		loss*) ((retx > 0)) || fail "no packet was retransmitted under '$CASE'" ;;
		duplicate*) ((dup > 0)) || fail "no duplicate request was counted under '$CASE'" ;;
		esac
	fi
done
clear_netem
if [[ $LINK_TYPE == sroce ]]; then
	((SUM_SEQ = $(sum out_of_seq_request))) || true
	((SUM_SEQ > 0)) || fail "no sequence-error NAK was sent"
	(($(sum rcvd_seq_err) > 0)) || fail "no sequence-error NAK was received"
fi
