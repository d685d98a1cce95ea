#!/bin/bash
# Wire interop with the kernel's rxe: h1 runs rxe, h2 runs sroce (each
# provider owns UDP 4791 in its own namespace). Stock rdma-core tools with
# sroce as client and as server: SEND (payload-checked ping-pong, several
# sizes), RDMA WRITE, READ and atomics (perftest), rping (rdma_cm), UD (ibv_ud_pingpong,
# ib_send_bw -c UD; without loss only), and the byte-checking
# verbs_data program with each side as requester (WRITE with and without
# immediate, READ, atomics, SEND with several SGEs, error completions);
# verbs_qpex (every operation through the extended QP API, ATOMIC WRITE
# included) each side as requester; then the same under 2% netem loss both ways (without verbs_data's error
# cases: a lost fatal NAK leaves the requester retrying), and an rxe pair
# under that loss as the reference.
# timeout: 600
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce against rxe"
require_module_file
[[ -f $RXE_KO ]] || skip "no rdma_rxe.ko"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
load_sroce
on_exit unload_sroce
load_rxe
on_exit unload_rxe
two_hosts
add_link h1 rxe1 v1 rxe
add_link h2 sroce2 v2 sroce
on_exit del_all_links
wait_port_active rxe1
wait_port_active sroce2
g1=$(gid_index rxe1 10.77.1.1)
g2=$(gid_index sroce2 10.77.1.2)

# pair SERVER_IS CMD...: run CMD with the server on SERVER_IS's side.
pair() {
	local srv=$1 tool=$2 args=$3 want=$4
	if [[ $srv == rxe ]]; then
		run_pair h1 "$tool -d rxe1 $(gflag "$tool") $g1 $args" \
			h2 "$tool -d sroce2 $(gflag "$tool") $g2 $args 10.77.1.1"
	else
		run_pair h2 "$tool -d sroce2 $(gflag "$tool") $g2 $args" \
			h1 "$tool -d rxe1 $(gflag "$tool") $g1 $args 10.77.1.2"
	fi
	assert_match "$CLIENT_OUT" "$want" "$tool $args, $srv serving, under '$CASE'"
}
gflag() { [[ $1 == ibv_* ]] && echo -g || echo -x; }

matrix() {
	local srv
	for srv in rxe sroce; do
		pair "$srv" ibv_rc_pingpong "-n 20 -s 1 -m 1024 -c" "20 iters in"
		pair "$srv" ibv_rc_pingpong "-n 20 -s 100000 -m 1024 -c" "20 iters in"
		pair "$srv" ib_write_bw "-n 50 -s 65536 -F" '^ *65536 +50 +[0-9.]+'
		pair "$srv" ib_read_bw "-n 50 -s 65536 -F" '^ *65536 +50 +[0-9.]+'
		pair "$srv" ib_send_bw "-n 50 -s 4096 -F" '^ *4096 +50 +[0-9.]+'
		pair "$srv" ib_atomic_bw "-n 50 -F" '^ *8 +50 +[0-9.]+'
		pair "$srv" ib_atomic_bw "-n 50 -F -A CMP_AND_SWAP" '^ *8 +50 +[0-9.]+'
		pair "$srv" ib_send_lat "-n 50 -s 64 -F" "^ *64 +50 +$PERF_NUM"
		# UD is unreliable and these tools do not resend: no loss only.
		if [[ $CASE == "no loss" ]]; then
			pair "$srv" ibv_ud_pingpong "-n 20 -s 1024 -c" "20 iters in"
			pair "$srv" ib_send_bw "-c UD -n 100 -s 1024 -F" '^ *1024 +100 +[0-9.]+'
		fi
	done
	# rdma_cm: rping with data verification, each provider serving.
	cm_run_pair h1 "rping -s -a 10.77.1.1 -v -V -C 10" h2 "rping -c -a 10.77.1.1 -v -V -C 10"
	assert_match "$CLIENT_OUT" "ping data" "rping, rxe serving, under '$CASE'"
	cm_run_pair h2 "rping -s -a 10.77.1.2 -v -V -C 10" h1 "rping -c -a 10.77.1.2 -v -V -C 10"
	assert_match "$CLIENT_OUT" "ping data" "rping, sroce serving, under '$CASE'"
	local run out rc
	for run in "rxe1 $g1 sroce2 $g2" "sroce2 $g2 rxe1 $g1"; do
		rc=0
		# verbs_data checks rxe's own local behaviour as rxe's (a bad
		# local lkey is skipped, a too-small receive gets rxe's statuses).
		local side=B
		[[ $run == rxe* ]] && side=A
		local -a lossy=()
		[[ $CASE == "no loss" ]] || lossy=(VERBS_DATA_LOSSY=1)
		local -a args
		read -ra args <<<"$run"
		out=$(env "${lossy[@]}" VERBS_DATA_RXE_SIDE=$side timeout 300 "$SROCE_BIN/verbs_data" "${args[@]}" 2>&1) || rc=$?
		{ grep -E '^FAIL|got wr_id|no completion' <<<"$out" || true; } | head -20 | sed 's/^/#   /'
		((rc == 0)) || fail "verbs_data $run under '$CASE' exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
		assert_contains "$out" "all checks passed" "verbs_data $run under '$CASE'"
		log "verbs_data $run under '$CASE': $(grep -c '^ok' <<<"$out") checks passed"
	done
}

CASE="no loss"
matrix
# Every operation through the extended QP API, ATOMIC WRITE included,
# each side as requester (UD's datagrams are not resent: no loss only).
checks_pass verbs_qpex rxe1 "$g1" sroce2 "$g2"
checks_pass verbs_qpex sroce2 "$g2" rxe1 "$g1"
for n in 1 2; do in_ns "h$n" tc qdisc add dev "v$n" root netem loss 2%; done
on_exit "for n in 1 2; do ip netns exec h\$n tc qdisc del dev v\$n root 2>/dev/null; done; true"
CASE="loss 2%"
LOSSY_WIRE=1
matrix

# The reference pair under the same loss: rxe on both hosts. Not
# ibv_rc_pingpong: with its two-slot send queue rxe's requester can stall
# for good when an ACK (rxe's responder re-ACKs a duplicate with the last
# PSN it received) completes the message it is resending (seen in about 3%
# of such runs rxe to rxe; sroce's responder never ACKs past a duplicate).
del_link sroce2
add_link h2 rxe2 v2 rxe
wait_port_active rxe2
g2=$(gid_index rxe2 10.77.1.2)
CASE="loss 2%, rxe to rxe"
run_pair h1 "ib_write_bw -d rxe1 -x $g1 -n 50 -s 65536 -F" \
	h2 "ib_write_bw -d rxe2 -x $g2 -n 50 -s 65536 -F 10.77.1.1"
assert_match "$CLIENT_OUT" '^ *65536 +50 +[0-9.]+' "ib_write_bw rxe to rxe under 2% loss"
