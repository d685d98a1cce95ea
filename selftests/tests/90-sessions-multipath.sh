#!/bin/bash
# The multipath transport between two sroce peers (docs/sessions.md
# "Multipath transport"). Two hosts joined by two links (as in
# 90-sessions-two-paths), groups of two sessions: each side's requester
# sends hellos, the peer answers, and from then on its messages go over
# both links while the responder holds what arrives early and acknowledges
# selectively. Checked:
# - with link w 5 ms slower than v (every message spread over both links
#   arrives out of order) and 1% loss on it, both ways: the byte-checking
#   verbs_data (WRITE, READ, atomics, SEND, both sides requester) and
#   perftest WRITE, READ, SEND and atomics pass under every policy;
#   requests were held, SACKs went out and came back, lost packets were
#   resent selectively, each side cut the congestion window of the lossy
#   session, and `rdma resource show qp` says so per direction; `sroce
#   session show` lists each session's window;
# - a message larger than a session's window moves on to the other
#   session partway (1 MiB WRITEs: flowlets within one message);
# - a session whose link loses 10% of its packets gets a fresh 5-tuple
#   (`sroce monitor` reports it, `session show` counts it), data intact;
# - a one-session group never starts it (no hello), and still works with
#   a multi-session peer (it answers: its responder holds);
# - an rxe peer: sroce's hellos are duplicates rxe only re-ACKs; nothing
#   is agreed, sroce sends it no extension packet (no hello ACK, no SACK),
#   and verbs_data both ways and perftest are byte-for-byte right.
# Cutting a link mid-transfer with the transport agreed is
# 90-sessions-two-paths.
# timeout: 900
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's multipath transport"
require_module_file
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
SROCE=$SROCE_BIN/sroce
[[ -x $SROCE ]] || fail "no sroce tool at $SROCE"
load_sroce
on_exit unload_sroce
multipath_hosts
link_devices 10.77.9.1 10.77.9.2
g1=$G1 g2=$G2
# As in 90-sessions-two-paths: a transport timeout above a busy TCG VM's
# bulk round trip (537 ms; 2.1 s on a debug kernel).
if ((SCALE > 1)); then QP_TIMEOUT=19; else QP_TIMEOUT=17; fi

declare -A base
# mark: remembers every multipath counter of both devices.
mark() {
	local d c
	for d in "$@"; do
		for c in mp_hellos_sent mp_hellos_answered mp_agreed mp_held mp_hold_dropped \
			mp_sacks_sent mp_sacks_rcvd mp_selective_resends mp_resends_skipped \
			mp_replaced mp_window_cuts mp_window_full mp_flowlet_switches \
			retransmitted_pkts; do
			base[$d.$c]=$(hw_counter_or_0 "$d" "$c")
		done
	done
}
# moved DEV COUNTER: how much it moved since mark.
moved() { echo $(($(hw_counter_or_0 "$1" "$2") - ${base[$1.$2]:-0})); }
group() { # SIZE1 SIZE2 POLICY: sroce1's and sroce2's groups
	assert_ok "$SROCE" dev set sroce1 group-size "$1" policy "$3" reorder-guard on
	assert_ok "$SROCE" dev set sroce2 group-size "$2" policy "$3" reorder-guard on
	log "sessions: sroce1 group-size $1, sroce2 group-size $2, policy $3"
}
verbs_data() { # DEV_A GID_A DEV_B GID_B WHAT
	local out rc=0
	# verbs_data checks rxe's own local behaviour as rxe's.
	local -a rxe=()
	[[ $1 == rxe* ]] && rxe=(VERBS_DATA_RXE_SIDE=A)
	[[ $3 == rxe* ]] && rxe=(VERBS_DATA_RXE_SIDE=B)
	# Under loss its error cases are left out: a lost fatal NAK leaves the
	# requester retrying until its retries run out, as on any RC path.
	local -a lossy=()
	[[ -n ${LOSSY:-} ]] && lossy=(VERBS_DATA_LOSSY=1)
	out=$(env "${rxe[@]}" "${lossy[@]}" SROCE_QP_TIMEOUT=$QP_TIMEOUT timeout $((300 * SCALE)) "$SROCE_BIN/verbs_data" "$1" "$2" "$3" "$4" 2>&1) || rc=$?
	{ grep -E '^FAIL|got wr_id|no completion' <<<"$out" || true; } | head -10 | sed 's/^/#   /'
	((rc == 0)) || fail "verbs_data $1 -> $3 under $5 exited $rc"
	assert_contains "$out" "all checks passed" "verbs_data $1 -> $3 under $5"
}
perftest() { # TOOL SIZE SRVDEV SRVGID CLIDEV CLIGID SRVADDR WHAT (ITERS: 200)
	local n=${ITERS:-200}
	run_pair h1 "$1 -d $3 -x $4 -u $QP_TIMEOUT -n $n -s $2 -F" \
		h2 "$1 -d $5 -x $6 -u $QP_TIMEOUT -n $n -s $2 -F $7"
	assert_match "$CLIENT_OUT" "^ *$2 +$n +[0-9.]+ +[0-9.]+" "$1 -s $2 under $8"
}
# perftest_from_h1 TOOL SIZE WHAT: sroce1 the client (requester), sroce2
# serving.
perftest_from_h1() {
	run_pair h2 "$1 -d sroce2 -x $g2 -u $QP_TIMEOUT -n 200 -s $2 -F" \
		h1 "$1 -d sroce1 -x $g1 -u $QP_TIMEOUT -n 200 -s $2 -F 10.77.9.2"
	assert_match "$CLIENT_OUT" "^ *$2 +200 +[0-9.]+ +[0-9.]+" "$1 -s $2 from h1 under $3"
}
sroce_perftests() { # WHAT
	local t
	for t in ib_write_bw ib_read_bw ib_send_bw; do
		perftest "$t" 65536 sroce1 "$g1" sroce2 "$g2" 10.77.9.1 "$1"
	done
	perftest ib_atomic_bw 8 sroce1 "$g1" sroce2 "$g2" 10.77.9.1 "$1"
}

# Link w 5 ms slower than v, no loss: every message spread over both
# arrives out of order; verbs_data with its error cases (fatal NAKs).
for n in 1 2; do in_ns "h$n" tc qdisc add dev "w$n" root netem delay 5ms; done
log "w1-w2: netem delay 5ms both ways"
mark sroce1 sroce2
group 2 2 round-robin
verbs_data sroce1 "$g1" sroce2 "$g2" "round-robin, w slower"
verbs_data sroce2 "$g2" sroce1 "$g1" "round-robin, w slower"
(($(moved sroce1 mp_held) > 0)) || fail "sroce1 held nothing although w is 5 ms slower"
# One message far larger than a session's window (1024 packets; windows
# start at 16): its packets go on the other session once its own is full.
perftest ib_write_bw 1048576 sroce1 "$g1" sroce2 "$g2" 10.77.9.1 "round-robin, w slower, 1 MiB messages"
log "sroce2: flowlet switches +$(moved sroce2 mp_flowlet_switches), window full +$(moved sroce2 mp_window_full), window cuts +$(moved sroce2 mp_window_cuts)"
(($(moved sroce2 mp_flowlet_switches) > 0)) || fail "no 1 MiB message of sroce2 moved to the other session when its own window was full"
# And 1% of w's packets lost, both ways.
for n in 1 2; do in_ns "h$n" tc qdisc change dev "w$n" root netem delay 5ms loss 1%; done
log "w1-w2: netem delay 5ms loss 1% both ways"
LOSSY=1
for policy in round-robin least-outstanding hash failover; do
	group 2 2 "$policy"
	verbs_data sroce1 "$g1" sroce2 "$g2" "$policy, w slower and lossy"
	verbs_data sroce2 "$g2" sroce1 "$g1" "$policy, w slower and lossy"
	sroce_perftests "$policy, w slower and lossy"
done
# sroce1 as the requester of a stream too (12800 packets, half on w).
group 2 2 round-robin
perftest_from_h1 ib_write_bw 65536 "round-robin, w slower and lossy"
for d in sroce1 sroce2; do
	log "$d: agreed +$(moved $d mp_agreed), hellos +$(moved $d mp_hellos_sent) (answered +$(moved $d mp_hellos_answered)), held +$(moved $d mp_held) (dropped +$(moved $d mp_hold_dropped)), SACKs out +$(moved $d mp_sacks_sent) in +$(moved $d mp_sacks_rcvd), selective resends +$(moved $d mp_selective_resends), go-back resends skipped +$(moved $d mp_resends_skipped), window cuts +$(moved $d mp_window_cuts), window full +$(moved $d mp_window_full), retransmitted +$(moved $d retransmitted_pkts)"
done
# Each side was requester (verbs_data both ways): both agreed, both held
# and acknowledged selectively, both resent selectively (1% of w's packets
# are lost and later ones on w arrive), and each loss a SACK showed cut
# its session's window (the first of an episode does).
for d in sroce1 sroce2; do
	for c in mp_agreed mp_hellos_answered mp_held mp_sacks_sent mp_sacks_rcvd mp_selective_resends \
		mp_window_cuts; do
		(($(moved $d $c) > 0)) || fail "$d: $c did not move"
	done
done
# Per direction, in the RDMA core's resource dump, while a stream runs.
group 2 2 round-robin
bg_in h1 "$TEST_TMP/server.log" ib_write_bw -d sroce1 -x "$g1" -u "$QP_TIMEOUT" -s 65536 -D 2 --run_infinitely -F
srv=$BG_PID
wait_listen h1 "$OOB_PORT"
bg_in h2 "$TEST_TMP/client.log" ib_write_bw -d sroce2 -x "$g2" -u "$QP_TIMEOUT" -s 65536 -D 2 --run_infinitely -F 10.77.9.1
cli=$BG_PID
deadline=$((SECONDS + 60 * SCALE))
until res2=$(rdma -dd resource show qp link sroce2/1 2>&1) && [[ $res2 == *"multipath_tx 1"* ]]; do
	kill -0 "$cli" 2>/dev/null || fail "the stream's client exited: $(cat "$TEST_TMP/client.log")"
	((SECONDS < deadline)) || break
	sleep 0.2
done
res1=$(rdma -dd resource show qp link sroce1/1 2>&1)
list=$(in_ns h2 "$SROCE" session show sroce2)
json=$(in_ns h2 "$SROCE" -j session show sroce2)
kill "$cli" "$srv" 2>/dev/null || true
wait "$cli" "$srv" 2>/dev/null || true
log "client QP: $(grep -E 'type RC' <<<"$res2" | grep -oE 'drv_multipath_(tx|rx) [01]' | tr '\n' ' ')"
log "server QP: $(grep -E 'type RC' <<<"$res1" | grep -oE 'drv_multipath_(tx|rx) [01]' | tr '\n' ' ')"
assert_match "$res2" "multipath_tx 1" "the client QP sprays (rdma resource show qp)"
assert_match "$res1" "multipath_rx 1" "the server QP holds and SACKs (rdma resource show qp)"
log "sessions of sroce2:"$'\n'"$list"
assert_match "$list" "^sroce2 qp [0-9]+ session 1 .* cwnd [1-9][0-9]* cuts [0-9]+" \
	"sroce session show lists the spraying sessions' congestion windows"
assert_match "$json" '"cwnd":[1-9][0-9]*,"window_cuts":[0-9]+' "sroce -j session show has the windows"
for n in 1 2; do in_ns "h$n" tc qdisc del dev "w$n" root; done
LOSSY=

# A congested session gets a fresh 5-tuple: 10% of the client's packets
# on link w are lost; the session that leaves through it loses more than
# 3% in three epochs (128 of its packets each) in a row and is given
# another source port (preferably one routed through the other link).
# Its congestion window gives it a small share of the stream (a few
# packets per round trip), so the stream is long: 51200 packets.
# `sroce session show` counts it, `sroce monitor` reports it, the data
# stays intact.
group 2 2 round-robin
mark sroce2
bg_in h2 "$TEST_TMP/monitor.log" "$SROCE" monitor
mon=$BG_PID
deadline=$((SECONDS + 10 * SCALE))
until grep -q . "$TEST_TMP/monitor.log" 2>/dev/null || ((SECONDS > deadline)); do sleep 0.1; done
in_ns h2 tc qdisc add dev w2 root netem loss 10%
log "w2 (h2 to h1): netem loss 10%"
ITERS=800 perftest ib_write_bw 65536 sroce1 "$g1" sroce2 "$g2" 10.77.9.1 "10% loss on w"
LOSSY=1 verbs_data sroce2 "$g2" sroce1 "$g1" "10% loss on w"
in_ns h2 tc qdisc del dev w2 root
kill "$mon" 2>/dev/null || true
wait "$mon" 2>/dev/null || true
log "sroce2: replaced +$(moved sroce2 mp_replaced), selective resends +$(moved sroce2 mp_selective_resends)"
log "monitor:"$'\n'"$(grep -E 'replace' "$TEST_TMP/monitor.log" | head -5)"
(($(moved sroce2 mp_replaced) > 0)) || fail "no session of sroce2 was replaced under 10% loss on its link"
assert_match "$(cat "$TEST_TMP/monitor.log")" "^event sroce2 qp [0-9]+ session [01] 10\.77\.9\.2:[0-9]+ -> 10\.77\.9\.1:4791 up .* replaced [1-9][0-9]*( cwnd [0-9]+ cuts [0-9]+)? \(replaces port [0-9]+\)" \
	"sroce monitor reports the replacement"

# One-session groups: no hello, nothing agreed, plain RoCEv2.
group 1 1 round-robin
mark sroce1 sroce2
verbs_data sroce1 "$g1" sroce2 "$g2" "one session each"
perftest ib_write_bw 65536 sroce1 "$g1" sroce2 "$g2" 10.77.9.1 "one session each"
for d in sroce1 sroce2; do
	for c in mp_hellos_sent mp_hellos_answered mp_agreed mp_sacks_sent mp_held; do
		assert_eq "$(moved $d $c)" 0 "$d: $c with one-session groups"
	done
done
# A one-session group and a two-session peer: the one-session side never
# asks, but answers; the data is right both ways.
group 1 2 round-robin
mark sroce1 sroce2
verbs_data sroce1 "$g1" sroce2 "$g2" "one session against two"
verbs_data sroce2 "$g2" sroce1 "$g1" "two sessions against one"
assert_eq "$(moved sroce1 mp_hellos_sent)" 0 "the one-session side sent no hello"
(($(moved sroce2 mp_agreed) > 0)) || fail "the two-session side did not agree with the one-session side, which answers"

# An rxe peer on v1 (sroce1 goes: one provider per namespace owns UDP
# 4791), reached over the v link's addresses: only sroce's source ports
# vary (rxe's address check holds).
[[ -f $RXE_KO ]] || skip "no rdma_rxe.ko for the rxe part"
del_link sroce1
load_rxe
on_exit unload_rxe
add_link h1 rxe1 v1 rxe
on_exit "rdma link delete rxe1 2>/dev/null || true"
wait_port_active rxe1
gr=$(gid_index rxe1 10.77.1.1)
gs=$(gid_index sroce2 10.77.1.2)
assert_ok "$SROCE" dev set sroce2 group-size 2 policy round-robin reorder-guard off
mark sroce2
dup0=$(hw_counter_or_0 rxe1 duplicate_request)
verbs_data sroce2 "$gs" rxe1 "$gr" "sroce with two sessions, rxe peer"
verbs_data rxe1 "$gr" sroce2 "$gs" "rxe requester, sroce with two sessions"
perftest ib_write_bw 65536 rxe1 "$gr" sroce2 "$gs" 10.77.1.1 "rxe serving sroce with two sessions"
perftest ib_read_bw 65536 rxe1 "$gr" sroce2 "$gs" 10.77.1.1 "rxe serving sroce with two sessions"
log "sroce2 against rxe: hellos sent +$(moved sroce2 mp_hellos_sent), answered +$(moved sroce2 mp_hellos_answered), agreed +$(moved sroce2 mp_agreed), SACKs sent +$(moved sroce2 mp_sacks_sent); rxe's duplicate requests +$(($(hw_counter_or_0 rxe1 duplicate_request) - dup0))"
(($(moved sroce2 mp_hellos_sent) > 0)) || fail "sroce sent no hello to rxe (the check below would prove nothing)"
for c in mp_agreed mp_hellos_answered mp_sacks_sent mp_held; do
	assert_eq "$(moved sroce2 $c)" 0 "sroce2: $c against rxe (no extension packet may reach it)"
done
