#!/bin/bash
# A request packet the local stack refuses (its queue full: here veth's
# per-CPU backlog, made 16 packets deep) is taken back and sent again once
# the queue drains (counter send_requeued, each also a send_err), not
# counted as lost and resent only after a NAK or a timeout. A stream of
# 4 KiB WRITEs (lone packets at MTU 1024) then completes, and verbs_data's
# bytes check out under the same backlog.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's requester"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2

hw() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

backlog=$(sysctl -n net.core.netdev_max_backlog)
restore_backlog() { sysctl -qw net.core.netdev_max_backlog="$backlog"; }
on_exit restore_backlog
sysctl -qw net.core.netdev_max_backlog=16

requeued=$(hw sroce2 send_requeued) errs=$(hw sroce2 send_err)
run_pair h1 "ib_write_bw -d sroce1 -x $g1 -n 3000 -s 4096 -F" \
	h2 "ib_write_bw -d sroce2 -x $g2 -n 3000 -s 4096 -F 10.77.1.1"
assert_match "$CLIENT_OUT" "^ *4096 +3000 +$PERF_NUM +$PERF_NUM" "ib_write_bw result line"
requeued=$(($(hw sroce2 send_requeued) - requeued)) errs=$(($(hw sroce2 send_err) - errs))
note "ib_write_bw 4 KiB x 3000, backlog 16: sroce2 send_requeued +$requeued, send_err +$errs, retransmitted_pkts $(hw sroce2 retransmitted_pkts), local_ack_timeout_err $(hw sroce2 local_ack_timeout_err)"
((requeued > 0)) || fail "no refused packet was taken back (send_err +$errs)"
((errs >= requeued)) || fail "send_requeued +$requeued but send_err +$errs: each is a refused send"

rc=0
out=$(in_h1 timeout 200 "$SROCE_BIN/verbs_data" sroce1 "$g1" sroce2 "$g2" 2>&1) || rc=$?
printf '%s\n' "$out" | grep -v '^ok' || true
((rc == 0)) || fail "verbs_data exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
assert_contains "$out" "all checks passed" "verbs_data with a 16-packet backlog"
