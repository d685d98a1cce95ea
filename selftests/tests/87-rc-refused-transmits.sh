#!/bin/bash
# A request packet the local stack refuses (its queue full: here veth's
# per-CPU backlog, made 16 packets deep) is taken back and sent again once
# the queue drains (counter send_requeued, each also a send_err), not
# counted as lost and resent only after a NAK or a timeout. A stream of
# 64 KiB WRITEs then completes, and verbs_data's bytes check out under the
# same backlog. The module sends every packet alone (udp_segmentation=0),
# so a pass that sends one such message at MTU 1024 queues 64 packets in
# its CPU's backlog before that CPU's softirqs run (the QP's lock keeps
# them off): the backlog (16, plus one) refuses some on every such pass,
# whatever the passes' timing. A queue that never drains (a
# qdisc that drops everything) is taken for a dead link after 100 refusals
# in a row: the requester's retries run out (IBV_WC_RETRY_EXC_ERR) instead
# of it trying again forever.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's requester"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
require_module_file
insmod "$MOD_KO" udp_segmentation=0 || fail "insmod $MOD_KO udp_segmentation=0"
on_exit unload_sroce
two_hosts
link_devices 10.77.1.1 10.77.1.2
g1=$G1 g2=$G2

backlog=$(sysctl -n net.core.netdev_max_backlog)
restore_backlog() { sysctl -qw net.core.netdev_max_backlog="$backlog"; }
on_exit restore_backlog
sysctl -qw net.core.netdev_max_backlog=16

requeued=$(hw_counter sroce2 send_requeued) errs=$(hw_counter sroce2 send_err)
run_pair h1 "ib_write_bw -d sroce1 -x $g1 -m 1024 -n 300 -s 65536 -F" \
	h2 "ib_write_bw -d sroce2 -x $g2 -m 1024 -n 300 -s 65536 -F 10.77.1.1"
assert_perftest_row 65536 300 "ib_write_bw result line"
requeued=$(($(hw_counter sroce2 send_requeued) - requeued)) errs=$(($(hw_counter sroce2 send_err) - errs))
note "ib_write_bw 64 KiB x 300, packets alone, backlog 16: sroce2 send_requeued +$requeued, send_err +$errs, retransmitted_pkts $(hw_counter sroce2 retransmitted_pkts), local_ack_timeout_err $(hw_counter sroce2 local_ack_timeout_err)"
((requeued > 0)) || fail "no refused packet was taken back (send_err +$errs)"
((errs >= requeued)) || fail "send_requeued +$requeued but send_err +$errs: each is a refused send"

rc=0
out=$(in_h1 timeout 200 "$SROCE_BIN/verbs_data" sroce1 "$g1" sroce2 "$g2" 2>&1) || rc=$?
printf '%s\n' "$out" | grep -v '^ok' || true
((rc == 0)) || fail "verbs_data exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
assert_contains "$out" "all checks passed" "verbs_data with a 16-packet backlog"
restore_backlog

# A ping-pong (one message in flight, nothing else unacknowledged when the
# next is refused), then every packet h2 sends refused by a qdisc of no
# room: perftest's QP (timeout 14 = 67 ms, 7 retries) must fail within
# its budget plus the refusals' ~20 ms. Only the RDMA side can end the
# client: the TCP side channel is idle until the end.
requeued=$(hw_counter sroce2 send_requeued) retry0=$(hw_counter sroce2 retry_exceeded_err)
bg_in h1 "$TEST_TMP/server.log" ib_write_lat -d sroce1 -x "$g1" -n 1000000 -F
srv=$BG_PID
wait_listen h1 "$OOB_PORT"
bg_in h2 "$TEST_TMP/client.log" ib_write_lat -d sroce2 -x "$g2" -n 1000000 -F 10.77.1.1
cli=$BG_PID
sleep 3
kill -0 "$cli" 2>/dev/null || fail "ib_write_lat ended early: $(cat "$TEST_TMP/client.log")"
in_h2 tc qdisc add dev v2 root pfifo limit 0
t0=$SECONDS
while kill -0 "$cli" 2>/dev/null && ((SECONDS - t0 < 20)); do sleep 0.1; done
kill -0 "$cli" 2>/dev/null && fail "ib_write_lat still running 20 s after its packets were all refused"
rc=0
wait "$cli" || rc=$?
in_h2 tc qdisc del dev v2 root
kill -9 "$srv" 2>/dev/null || true
wait "$srv" 2>/dev/null || true
requeued=$(($(hw_counter sroce2 send_requeued) - requeued))
note "every packet refused: ib_write_lat exit $rc after $((SECONDS - t0)) s, send_requeued +$requeued"
((rc != 0)) || fail "ib_write_lat succeeded with every packet refused"
assert_match "$(cat "$TEST_TMP/client.log")" "Failed status 12" "retry error with every packet refused"
assert_eq 1 "$(($(hw_counter sroce2 retry_exceeded_err) - retry0))" "retry_exceeded_err"
# Taken back 100 times in a row at most, then lost: the retries that
# follow are refused and lost too (no packet went out in between).
((requeued >= 1 && requeued <= 100)) || fail "send_requeued +$requeued with every packet refused (want 1..100)"
