#!/bin/bash
# The kernel's rxe in its own VM: node 1 runs rdma_rxe, nodes 0 and 2 run
# sroce. In one VM, rxe's module exit would unregister sroce's devices too
# (sroce reports rxe's driver id so that rdma-core's rxe provider drives
# it); here each provider has its host. Checked: interop both ways across
# VMs (payload-checked RC ping-pongs, rping's verified RDMA READ/
# WRITE, perftest WRITE/READ/SEND/atomics), then `rmmod rdma_rxe` on node 1
# under a running sroce requester on node 0: the requester ends with the
# transport retry error (status 12), sroce on node 0 stays loaded and
# usable (a ping-pong with node 2's sroce), and once node 1 loads rxe
# again the two talk as before.
# timeout: 500
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"
need_nodes 3

sroce_on 0
rxe_on 1
sroce_on 2
g0=$(gid_on 0 sroce0) g1=$(gid_on 1 rxe0) g2=$(gid_on 2 sroce0)

# both TOOL ARGS WANT: TOOL between node 0 (sroce) and node 1 (rxe), each
# side once the server; the client's output must match WANT.
both() {
	local tool=$1 args=$2 want=$3 gflag=-x
	[[ $tool == ibv_* ]] && gflag=-g
	pair_on 1 "$tool -d rxe0 $gflag $g1 $args" 0 "$tool -d sroce0 $gflag $g0 $args $(ip_of 1)"
	assert_match "$CLIENT_OUT" "$want" "$tool $args, rxe serving"
	pair_on 0 "$tool -d sroce0 $gflag $g0 $args" 1 "$tool -d rxe0 $gflag $g1 $args $(ip_of 0)"
	assert_match "$CLIENT_OUT" "$want" "$tool $args, sroce serving"
}
both ibv_rc_pingpong "-n 200 -s 4096 -c" "200 iters in"
both ibv_rc_pingpong "-n 50 -s 65536 -m 1024 -c" "50 iters in"
both ib_write_bw "-n 200 -s 65536 -F" "65536 +200 "
both ib_read_bw "-n 200 -s 65536 -F" "65536 +200 "
both ib_send_bw "-n 200 -s 4096 -F" "4096 +200 "
both ib_atomic_bw "-n 200 -F" "8 +200 "
log "sroce (node 0) and rxe (node 1) interoperate, each side as server"

# rping both ways (-V: the client checks every round's data).
for dir in "1 0" "0 1"; do
	read -r s c <<<"$dir"
	on_bg "$s" "$TEST_TMP/rping-server.log" "rping -s -a $(ip_of "$s") -p 7174 -C 30 -S 16384 -V"
	srv=$BG_PID
	retry 20 on "$s" "rdma resource show cm_id | grep -q LISTEN" || fail "rping server on node $s does not listen"
	out=$(on "$c" "timeout $((120 * SCALE)) rping -c -a $(ip_of "$s") -p 7174 -C 30 -S 16384 -V -v" 2>&1) ||
		fail "rping node $c -> node $s failed: $(tail -n 3 <<<"$out")"
	wait "$srv" || fail "rping server on node $s failed: $(tail -n 3 "$TEST_TMP/rping-server.log")"
	assert_eq 30 "$(grep -c 'ping data' <<<"$out")" "rping rounds node $c -> node $s"
done
log "rping verified both ways"

log "rmmod rdma_rxe on node 1 under a running sroce requester on node 0"
retry0=$(counter_on 0 sroce0 retry_exceeded_err)
refcnt0=$(cat /sys/module/sroce/refcnt)
# The stream must outlive every step below, however slow: a client whose
# duration ends first stops requesting and waits on its side channel (whose
# closing is hidden from it below), and nothing is left to time out. With
# the stream saturating node 1's CPU, each command there takes seconds
# (seen: 52 s to see the stream start, 17 s for pkill and rmmod), so the
# duration outlasts the test's own timeout and the stream is watched from
# here: the ACKs node 0 receives are rxe answering it.
secs=$((600 * SCALE))
on_bg 1 "$TEST_TMP/server.log" "ib_write_bw -d rxe0 -x $g1 -D $secs -s 65536 -F"
srv=$BG_PID
wait_listen_on 1 "$OOB_PORT"
acks0=$(hw_counter sroce0 rcvd_pkts)
bg_in - "$TEST_TMP/client.log" ib_write_bw -d sroce0 -x "$g0" -D "$secs" -s 65536 -F "$(ip_of 1)"
cli=$BG_PID
# Until the stream runs (rxe has acknowledged a hundred of its packets).
for ((i = 0; i < 120 * SCALE; i++)); do
	kill -0 "$cli" 2>/dev/null || fail "the sroce client ended early: $(cat "$TEST_TMP/client.log")"
	(($(hw_counter sroce0 rcvd_pkts) - acks0 >= 100)) && break
	sleep 0.5
done
(($(hw_counter sroce0 rcvd_pkts) - acks0 >= 100)) || fail "the WRITE stream to rxe did not start"
# perftest's client ends as soon as its TCP side channel closes: keep the
# server's FIN from it, so only the RDMA side can end it.
tc qdisc add dev "$NETDEV" ingress
on_exit "tc qdisc del dev $NETDEV ingress"
tc filter add dev "$NETDEV" parent ffff: protocol ip u32 \
	match ip protocol 6 0xff match ip sport "$OOB_PORT" 0xffff action drop
# The rxe side's process holds a module reference (rxe cannot disassociate
# a process from its device), so it goes first, and then the module.
on 1 "pkill -9 -x ib_write_bw || true; for i in \$(seq 50); do pgrep -x ib_write_bw >/dev/null || break; sleep 0.2; done
	rmmod rdma_rxe" || fail "rmmod rdma_rxe on node 1 failed"
on 1 "! lsmod | grep -q '^rdma_rxe '" || fail "rdma_rxe still loaded on node 1"
t0=$SECONDS rc=0
while kill -0 "$cli" 2>/dev/null && ((SECONDS - t0 < 20 * SCALE)); do sleep 0.2; done
kill -0 "$cli" 2>/dev/null && fail "the sroce requester still runs 20 s after rxe went away"
wait "$cli" || rc=$?
log "sroce requester after rxe's unload ($((SECONDS - t0)) s): exit $rc: $(tr '\n' ' ' <"$TEST_TMP/client.log")"
((rc != 0)) || fail "the sroce requester succeeded although its peer went away"
assert_match "$(cat "$TEST_TMP/client.log")" "Failed status 12" "the sroce requester's completion"
wait "$srv" 2>/dev/null || true
tc qdisc del dev "$NETDEV" ingress 2>/dev/null || true
retry1=$(counter_on 0 sroce0 retry_exceeded_err)
((retry1 > retry0)) || fail "retry_exceeded_err on node 0 did not move ($retry0 -> $retry1)"
assert_eq "$refcnt0" "$(cat /sys/module/sroce/refcnt)" "sroce's module references on node 0 once its process ended"
assert_eq ACTIVE "$(port_state sroce0)" "node 0's sroce0 port"

pair_on 2 "ibv_rc_pingpong -d sroce0 -g $g2 -n 100 -s 4096 -c" \
	0 "ibv_rc_pingpong -d sroce0 -g $g0 -n 100 -s 4096 -c $(ip_of 2)"
assert_match "$CLIENT_OUT" "100 iters in" "node 0's sroce with node 2's after rxe's unload"

rxe_on 1
g1=$(gid_on 1 rxe0)
both ibv_rc_pingpong "-n 100 -s 4096 -c" "100 iters in"
log "node 0's sroce works on with node 2's sroce and with node 1's reloaded rxe"
