#!/bin/bash
# UC, the unreliable connected service: stock rdma-core (ibv_uc_pingpong
# -c, several sizes) and perftest (-c UC) between two sroce devices; the
# byte-checking verbs_uc program (SEND and WRITE with and without
# immediate, messages B drops silently, the operations UC refuses, a
# receive too small); one device to itself over its link-local GID; a UC
# QP refusing a multi-session group; a lossy link (messages that lost a
# packet are dropped and counted in rcvd_drop_uc, what arrives is intact
# and in order, the QPs stay up); and rxe as the peer both ways.
# timeout: 480
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's UC"
command -v ibv_uc_pingpong >/dev/null || skip "ibverbs-utils is not installed"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
SROCE=$SROCE_BIN/sroce
g1=$G1 g2=$G2
on_exit del_all_links


verbs_uc() { checks_pass verbs_uc "$@"; }

# pingpong SERVER_DEV SERVER_GID CLIENT_DEV CLIENT_GID SIZE: payload-checked
# UC ping-pong, server in h1, client in h2.
pingpong() {
	run_pair h1 "ibv_uc_pingpong -d $1 -g $2 -n 20 -s $5 -m 1024 -c" \
		h2 "ibv_uc_pingpong -d $3 -g $4 -n 20 -s $5 -m 1024 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "20 iters in" "ibv_uc_pingpong -s $5, $1 serving $3"
}

for size in 1 4096 100000; do pingpong sroce1 "$g1" sroce2 "$g2" "$size"; done
# A device default of two sessions leaves UC QPs with one.
for d in sroce1 sroce2; do assert_ok "$SROCE" dev set "$d" group-size 2; done
pingpong sroce1 "$g1" sroce2 "$g2" 100000
for d in sroce1 sroce2; do assert_ok "$SROCE" dev set "$d" group-size 1; done
# Nothing paces a UC sender but its send queue: the SENDs are sized so
# that all of them in flight (400 packets) fit the receiving QP's queue
# of 512, since a SEND lost to a full queue would leave ib_send_bw's
# server waiting for it. WRITE's server waits for nothing.
for t in "ib_send_bw -s 4096" "ib_write_bw -s 65536"; do
	run_pair h1 "$t -d sroce1 -x $g1 -c UC -n 100 -F" \
		h2 "$t -d sroce2 -x $g2 -c UC -n 100 -F 10.77.1.1"
	assert_match "$CLIENT_OUT" '^ *[0-9]+ +100 +[0-9.]+ +[0-9.]+' "$t -c UC"
done
for t in ib_send_lat ib_write_lat; do
	run_pair h1 "$t -d sroce1 -x $g1 -c UC -n 100 -s 64 -F" \
		h2 "$t -d sroce2 -x $g2 -c UC -n 100 -s 64 -F 10.77.1.1"
	assert_perftest_row 64 100 "$t -c UC"
done
verbs_uc sroce2 "$g2" sroce1 "$g1"

# One device to itself over its IPv6 link-local GID (index 0 on a fresh
# port; found by address, not assumed).
ll=$(gid_table sroce1 | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
[[ -n $ll ]] || fail "no link-local RoCE v2 GID on sroce1"
verbs_uc sroce1 "$ll" sroce1 "$ll"

# Session health is judged from acknowledgements, which UC has none of:
# its QPs keep one session.
bg_in h2 "$TEST_TMP/uc-server.log" ibv_uc_pingpong -d sroce2 -g "$g2" -p 18600
srv=$BG_PID
wait_listen h2 18600
qpn=$(rdma res show qp link sroce2/1 2>/dev/null | awk '/type UC/ { for (i = 1; i < NF; i++) if ($i == "lqpn") print $(i + 1) }' | head -n 1)
[[ -n $qpn ]] || fail "the UC server's QP is not listed: $(rdma res show qp link sroce2/1 2>&1)"
assert_fails_with "not supported" "$SROCE" qp set sroce2 "$qpn" group-size 2
assert_ok "$SROCE" qp set sroce2 "$qpn" policy failover
kill "$srv" 2>/dev/null || true
wait "$srv" 2>/dev/null || true

# A lossy link: what arrives is intact, the rest is dropped and counted.
clear_netem() {
	local n
	for n in 1 2; do in_ns "h$n" tc qdisc del dev "v$n" root 2>/dev/null || true; done
}
on_exit clear_netem
for n in 1 2; do in_ns "h$n" tc qdisc replace dev "v$n" root netem loss 10% || fail "netem"; done
drop0=$(hw_counter_or_0 sroce1 rcvd_drop_uc)
verbs_uc sroce2 "$g2" sroce1 "$g1" lossy
clear_netem
drops=$(($(hw_counter_or_0 sroce1 rcvd_drop_uc) - drop0))
log "sroce1 rcvd_drop_uc +$drops under 10% loss"
# 100 messages of three packets: that none lost a packet has probability
# 0.9^300.
((drops > 0)) || fail "no UC packet was dropped under loss"
verbs_uc sroce2 "$g2" sroce1 "$g1"

# rxe as the peer: rxe1 takes sroce1's place on v1.
[[ -f $RXE_KO ]] || { note "no rdma_rxe.ko: UC interop with rxe not tested"; exit 0; }
del_link sroce1
load_rxe
on_exit unload_rxe
add_link h1 rxe1 v1 rxe
wait_port_active rxe1
gr=$(gid_index rxe1 10.77.1.1)
for size in 1 100000; do
	pingpong rxe1 "$gr" sroce2 "$g2" "$size"
done
run_pair h2 "ibv_uc_pingpong -d sroce2 -g $g2 -n 20 -s 100000 -m 1024 -c" \
	h1 "ibv_uc_pingpong -d rxe1 -g $gr -n 20 -s 100000 -m 1024 -c 10.77.1.2"
assert_match "$CLIENT_OUT" "20 iters in" "ibv_uc_pingpong, sroce2 serving rxe1"
verbs_uc sroce2 "$g2" rxe1 "$gr" data
verbs_uc rxe1 "$gr" sroce2 "$g2" data
