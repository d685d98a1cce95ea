#!/bin/bash
# Sessions over two paths. Each host has a service address (10.77.9.N/32)
# reached over a two-link multipath route (v1-v2 and w1-w2, L4 hashing);
# the sroce devices sit on v1/v2. With a group of two sessions each RC QP
# sends on two UDP 5-tuples whose source ports sroce picks so they leave
# through different links. Checked: every policy moves data intact; the
# extra session's port is held (no other socket can bind it); round-robin
# without the reorder guard uses both links; cutting one link mid-transfer
# (netem 100% loss) fails nothing, the cut session's own retransmit timer
# resends what was in flight on it, and traffic returns to it afterwards;
# an idle QP's session goes down with its link and comes back up by
# duplicate probes, which `sroce monitor` (the sroce-events group) reports;
# the receiving side counts each of the sender's sessions (flow show).
# The two sroce peers agree on the multipath transport (checked in the
# resource dump), so the cut happens with it on.
# timeout: 420
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's sessions"
require_module_file
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
SROCE=$SROCE_BIN/sroce
[[ -x $SROCE ]] || fail "no sroce tool at $SROCE"
load_sroce
on_exit unload_sroce
multipath_hosts
link_devices 10.77.9.1 10.77.9.2
g1=$G1 g2=$G2
log "GID index of 10.77.9.1 on sroce1: $g1, of 10.77.9.2 on sroce2: $g2"

# Bytes a host sent over one of its links (bytes, not packets: the packets
# of a message may cross a link as one UDP-segmented datagram).
tx() { in_ns "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
KIB=1024
# The RC QPs' transport timeout: 17, 4.096 us * 2^17 = 537 ms. A bulk
# stream's round trip is its window over its rate (128 packets of 1 KiB at
# the 2-4 MB/s of a TCG VM: 30-65 ms), so perftest's default of 14 (67 ms)
# is no longer above it when the machine is busy, and any RC stack then
# times out spuriously, again and again, until its retries run out.
# A kernel with KASAN and lockdep under TCG (SROCE_TIMEOUT_SCALE above 1)
# reacts several times slower: restoring a cut (a few forks of tc) there
# outlasts the retries of 537 ms timeouts, so the timeout grows with the
# scale (19: 2.1 s).
if ((SCALE > 1)); then
	QP_TIMEOUT=19
	RTO_MS=2147
else
	QP_TIMEOUT=17
	RTO_MS=537
fi
# A perftest stream from h2 to h1 (TOOL ARGS: e.g. ib_write_bw -s 65536)
# in the background that reports every 2 s and runs until end_stream, so
# whatever a test does meanwhile happens while data moves, however slow the
# machine; sets SRV and CLI to the two processes. It returns once the
# client reported a first interval.
start_stream() {
	bg_in h1 "$TEST_TMP/server.log" "$@" -d sroce1 -x "$g1" -u "$QP_TIMEOUT" -D 2 --run_infinitely -F
	SRV=$BG_PID
	wait_listen h1 "$OOB_PORT"
	bg_in h2 "$TEST_TMP/client.log" "$@" -d sroce2 -x "$g2" -u "$QP_TIMEOUT" -D 2 --run_infinitely -F 10.77.9.1
	CLI=$BG_PID
	wait_report 1 "its start"
}
start_write_bw() { start_stream ib_write_bw -s 65536; }
# An interval report: bytes, iterations, peak, average, message rate
# (separated by spaces and tabs).
REPORT='^ *[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+'
# reports: how many interval reports the stream's client printed.
reports() {
	grep -cE "$REPORT" "$TEST_TMP/client.log" || true
}
# stream_failed WHAT: the stream's client exited by itself (an error
# completion, a retry error): fails with its status and output.
stream_failed() {
	local rc=0
	wait "$CLI" || rc=$?
	kill -9 "$SRV" 2>/dev/null || true
	wait "$SRV" 2>/dev/null || true
	sed 's/^/#   /' "$TEST_TMP/client.log"
	local d
	for d in sroce1 sroce2; do
		log "$d's counters: $(grep -H . /sys/class/infiniband/$d/ports/1/hw_counters/* 2>/dev/null |
			sed 's|.*/||' | grep -v ':0$' | tr '\n' ' ')"
	done
	fail "the stream's client exited ($rc) $1"
}
# stuck_state: what a stalled stream leaves to look at (logged before a
# failure): where the client process waits, the sessions, the counters.
stuck_state() {
	log "client $CLI: wchan $(cat "/proc/$CLI/wchan" 2>/dev/null), stack:"$'\n'"$(cat "/proc/$CLI/stack" 2>/dev/null)"
	log "sessions of sroce2:"$'\n'"$(in_h2 "$SROCE" session show sroce2)"
	local d
	for d in sroce1 sroce2; do
		log "$d's counters: $(grep -H . /sys/class/infiniband/$d/ports/1/hw_counters/* 2>/dev/null |
			sed 's|.*/||' | grep -v ':0$' | tr '\n' ' ')"
	done
}
# wait_report N WHAT: until the client printed N interval reports.
wait_report() {
	local deadline=$((SECONDS + 60))
	while (($(reports) < $1)); do
		kill -0 "$CLI" 2>/dev/null || stream_failed "before its report $1 ($2)"
		((SECONDS < deadline)) || { stuck_state; fail "no report $1 from the stream's client in 60 s ($2)"; }
		sleep 0.1
	done
}
# sessions_until ERE WHAT: sroce2's session list, in LIST, once a line
# matches ERE (or after 30 s) while the stream runs.
sessions_until() {
	local deadline=$((SECONDS + 30))
	while LIST=$(in_h2 "$SROCE" session show sroce2) && ! grep -qE -- "$1" <<<"$LIST"; do
		kill -0 "$CLI" 2>/dev/null || stream_failed "$2"
		((SECONDS < deadline)) || break
		sleep 0.2
	done
}
# sessions_count_until REGEX N WHAT: like sessions_until, until at least N
# of sroce2's session lines match REGEX.
sessions_count_until() {
	local deadline=$((SECONDS + 30))
	while LIST=$(in_h2 "$SROCE" session show sroce2) && (($(grep -cE -- "$1" <<<"$LIST") < $2)); do
		kill -0 "$CLI" 2>/dev/null || stream_failed "$3"
		((SECONDS < deadline)) || break
		sleep 0.2
	done
}
# end_stream WHAT: checks that the stream still runs, waits until it moved
# data over w2 (at most 30 s; DW is the bytes h2 sent there meanwhile)
# and reported a whole interval after that with data moved, then stops
# both sides. (The next report may cover mostly the time before traffic
# resumed, e.g. a stall while both links were cut: the one after it lies
# wholly after.)
end_stream() {
	local w0 n deadline=$((SECONDS + 30))
	kill -0 "$CLI" 2>/dev/null || stream_failed "$1"
	w0=$(tx h2 w2)
	while DW=$(($(tx h2 w2) - w0)) && ((DW <= 100 * KIB && SECONDS < deadline)); do
		kill -0 "$CLI" 2>/dev/null || stream_failed "$1"
		sleep 0.2
	done
	n=$(reports)
	wait_report $((n + 2)) "$1"
	LAST_REPORT=$(grep -E "$REPORT" "$TEST_TMP/client.log" | tail -n 1)
	kill -0 "$CLI" 2>/dev/null || stream_failed "$1"
	kill "$CLI" 2>/dev/null || true
	wait "$CLI" 2>/dev/null || true
	kill -9 "$SRV" 2>/dev/null || true
	wait "$SRV" 2>/dev/null || true
	log "the stream's last report ($1): $LAST_REPORT"
	# Its iterations, not its bandwidth: under TCG perftest may report
	# 0.00 MB/s when its clock calibration is noisy ("r^2 < 0.9").
	(($(awk '{ print $2 }' <<<"$LAST_REPORT") > 0)) || fail "the stream moved no data in its last interval ($1)"
}
# held_ports: UDP sockets bound in h2 in the session port range (ss's
# socket dump is retried: it can be cut short while sockets close).
held_ports() {
	local out try
	for try in 1 2 3 4 5; do
		out=$(in_ns h2 ss -Huan) && break
		((try < 5)) || fail "ss -Huan in h2 failed"
		sleep 0.2
	done
	awk '{ n = split($4, a, ":"); p = a[n] } p >= 61000 && p <= 65535' <<<"$out" | wc -l
}
group() { # POLICY GUARD: both devices, for QPs connected from now on
	local d
	for d in sroce1 sroce2; do
		assert_ok "$SROCE" dev set "$d" group-size 2 policy "$1" reorder-guard "$2"
	done
	log "sessions: group-size 2 policy $1 reorder-guard $2"
}
pingpong() {
	run_pair h1 "ibv_rc_pingpong -d sroce1 -g $g1 -n 100 -s 4096 -m 1024 -c" \
		h2 "ibv_rc_pingpong -d sroce2 -g $g2 -n 100 -s 4096 -m 1024 -c 10.77.9.1"
	assert_match "$CLIENT_OUT" "100 iters in" "ibv_rc_pingpong under $1"
}
write_bw() { # WHAT [ARGS]: 300 WRITEs of 64 KiB (more perftest ARGS)
	run_pair h1 "ib_write_bw -d sroce1 -x $g1 -u $QP_TIMEOUT -n 300 -s 65536 -F ${2:-}" \
		h2 "ib_write_bw -d sroce2 -x $g2 -u $QP_TIMEOUT -n 300 -s 65536 -F ${2:-} 10.77.9.1"
	assert_match "$CLIENT_OUT" '^ *65536 +300 +[0-9.]+ +[0-9.]+' "ib_write_bw under $1"
}

verbs_data() {
	local out rc=0
	out=$(SROCE_QP_TIMEOUT=$QP_TIMEOUT timeout 300 "$SROCE_BIN/verbs_data" sroce1 "$g1" sroce2 "$g2" 2>&1) || rc=$?
	{ grep -E '^FAIL|got wr_id|no completion' <<<"$out" || true; } | head -10 | sed 's/^/#   /'
	((rc == 0)) || fail "verbs_data under $1 exited $rc"
	assert_contains "$out" "all checks passed" "verbs_data under $1"
}

for policy in hash round-robin least-outstanding failover; do
	group "$policy" on
	pingpong "$policy"
	write_bw "$policy"
	verbs_data "$policy"
done
group round-robin off
verbs_data "round-robin without the reorder guard"

# Round-robin per message: both links carry the client's requests. One
# message at a time (-t 1: at most 64 packets in flight, within what the
# VM's receiver takes without a drop), so what is checked is where the
# policy puts messages. A stream that fills the receiver shares it as the
# two sessions' congestion windows settle, which need not be an even
# split in a run this short (docs/sessions.md, "Shared bottlenecks"): in
# 75 looped runs one session ended with 2-3 % of the bytes 3 times.
group round-robin off
v0=$(tx h2 v2) w0=$(tx h2 w2)
write_bw "round-robin without the reorder guard" "-t 1"
dv=$(($(tx h2 v2) - v0)) dw=$(($(tx h2 w2) - w0))
log "client's bytes: v2 +$dv, w2 +$dw"
((dv > 1000 * KIB && dw > 1000 * KIB)) || fail "round-robin did not use both links (v2 +$dv, w2 +$dw bytes)"

# A connected QP's group changed by the administrator (QP_SET): it starts
# with the device default of one session and gets two, on both links.
group hash on
for d in sroce1 sroce2; do assert_ok "$SROCE" dev set "$d" group-size 1; done
start_write_bw
list=$(in_h2 "$SROCE" session show sroce2)
log "sessions of sroce2 before qp set:"$'\n'"$list"
assert_eq "$(wc -l <<<"$list")" 1 "one session before qp set"
# Sessions are addresses and ports of connections: listed only in the
# namespace of the device's net device.
assert_eq "" "$("$SROCE" session show sroce2)" "sroce2's sessions from the root namespace"
assert_eq "" "$(in_h1 "$SROCE" session show sroce2)" "sroce2's sessions from h1"
qpn=$(awk '{ print $3 }' <<<"$list")
assert_fails_with "no such queue pair" "$SROCE" qp set sroce2 999999 policy failover
pub=$(mktemp -d)
on_exit "rm -rf $pub"
chmod 755 "$pub"
cp "$SROCE" "$pub/sroce"
assert_fails_with 'EPERM' setpriv --reuid=nobody --regid=nogroup --clear-groups \
	--inh-caps=-all --bounding-set=-all "$pub/sroce" qp set sroce2 "$qpn" group-size 2
assert_ok "$SROCE" qp set sroce2 "$qpn" group-size 2 policy round-robin reorder-guard off
# Until both links carried the stream (the new session first has to come
# up; a fixed wait failed on a slow run), at most 30 s.
v0=$(tx h2 v2) w0=$(tx h2 w2)
deadline=$((SECONDS + 30))
while dv=$(($(tx h2 v2) - v0)) dw=$(($(tx h2 w2) - w0)) && ((dv <= 500 * KIB || dw <= 500 * KIB)); do
	kill -0 "$CLI" 2>/dev/null || stream_failed "after qp set"
	((SECONDS < deadline)) || break
	sleep 0.2
done
list=$(in_h2 "$SROCE" session show sroce2)
log "sessions of sroce2 after qp set $qpn:"$'\n'"$list"
log "client's bytes after qp set: v2 +$dv, w2 +$dw"
assert_eq "$(grep -c "^sroce2 qp $qpn session [01] .* round-robin" <<<"$list")" 2 "two sessions after qp set"
# The same sessions as JSON (sroce -j), with their addresses and counters.
json=$(in_h2 "$SROCE" -j session show sroce2)
log "session show -j: $json"
got=$(python3 -c 'import json, sys
q = int(sys.argv[1])
s = [x for x in json.load(sys.stdin) if x["qpn"] == q]
print(len(s), sorted(x["session"] for x in s), {x["policy"] for x in s}, {(x["src"], x["dst"], x["dport"]) for x in s},
      all(x["tx_packets"] > 0 and x["sport"] > 0 for x in s))' "$qpn" <<<"$json") ||
	fail "session show -j is not a JSON array of sessions: $json"
assert_eq "2 [0, 1] {'round-robin'} {('10.77.9.2', '10.77.9.1', 4791)} True" "$got" "session show -j"
# The group in the RDMA core's resource dump (driver attributes). Two
# sroce peers with two sessions agree on the multipath transport
# (90-sessions-multipath): the cut below happens with it on. The
# agreement takes the responder's work item and a later hello (up to 2 s
# of them), which a busy VM may not have finished when both links carry
# the stream: read until it shows, at most 10 s.
qp_res() { rdma -dd resource show qp link sroce2/1 lqpn "$qpn" 2>&1 || true; }
agreed() { [[ $(qp_res) == *"multipath_tx 1"* ]]; }
retry 10 agreed || true
res=$(qp_res)
log "rdma -dd resource show qp lqpn $qpn: $res"
for d in sroce1 sroce2; do
	log "$d: $(for c in mp_hellos_sent mp_hellos_answered mp_agreed; do
		printf '%s %s ' "$c" "$(cat "/sys/class/infiniband/$d/ports/1/hw_counters/$c")"
	done)"
done
assert_match "$res" "session_group_size 2" "rdma resource show qp: group size"
assert_match "$res" "session_policy round-robin" "rdma resource show qp: policy"
assert_match "$res" "multipath_tx 1" "rdma resource show qp: multipath agreed"
((dv > 500 * KIB && dw > 500 * KIB)) || fail "after qp set the QP did not use both links (v2 +$dv, w2 +$dw bytes)"
# The server's side counts what it received per flow it came on: both of
# the client's session ports (sroce flow show, in h1), as text and JSON.
ports=$(sed -nE 's/^sroce2 qp [0-9]+ session [01] 10\.77\.9\.2:([0-9]+) .*/\1/p' <<<"$list" | sort -n | tr '\n' ' ')
flows=$(in_h1 "$SROCE" flow show sroce1)
log "sroce1's received flows (client session ports: $ports):"$'\n'"$flows"
for p in $ports; do
	assert_match "$flows" "^sroce1 qp [0-9]+ rx-flow [0-9]+ 10\.77\.9\.2:$p -> 10\.77\.9\.1:4791 rx [1-9][0-9]* pkts" \
		"sroce1 counts the packets that came from the client's port $p"
done
assert_eq "" "$("$SROCE" flow show sroce1)" "sroce1's flows from the root namespace"
json=$(in_h1 "$SROCE" -j flow show sroce1)
python3 -c 'import json, sys
f = json.load(sys.stdin)
want = {int(p) for p in sys.argv[1].split()}
seen = {x["sport"] for x in f if x.get("encap") == "roce-v2" and x["rx_packets"] > 0 and x["dport"] == 4791}
assert want <= seen, (want, f)' "$ports" <<<"$json" || fail "sroce -j flow show: $json"
end_stream "ib_write_bw across qp set"
group round-robin off

# The extra session's source port is held while the QP lives.
start_write_bw
live="^sroce2 qp [0-9]+ session [01] 10\.77\.9\.2:[0-9]+ -> 10\.77\.9\.1:4791 up policy round-robin tx [1-9]"
# Until both sessions carried packets (at most 30 s).
sessions_count_until "$live" 2 "before the held-port check"
log "sessions of sroce2:"$'\n'"$LIST"
assert_eq "$(grep -cE "$live" <<<"$LIST")" 2 "two live sessions carrying packets listed for the client QP"
# Another socket cannot bind a held port. A session may get a fresh port
# at any moment (replaced under loss: the old one is released), so a bind
# that succeeds on a port no session has any more proves nothing: tried
# again with the port held then (a bind that succeeds on a port a session
# still has fails the test).
held_port_refused() {
	local try ports port rc out
	for try in 1 2 3 4 5; do
		ports=$(in_ns h2 ss -Huan | awk '{ n = split($4, a, ":"); p = a[n] } p >= 61000 && p <= 65535 { print p }' | sort -u)
		log "held UDP ports in h2's range: ${ports//$'\n'/ }"
		[[ -n $ports ]] || fail "no session port is held in 61000-65535"
		port=${ports%%$'\n'*}
		rc=0
		out=$(in_ns h2 python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(('', $port))" 2>&1) || rc=$?
		log "another socket binding held port $port: status $rc: ${out##*$'\n'}"
		if ((rc != 0)); then
			grep -q "Address already in use" <<<"$out" || fail "binding held port $port failed otherwise: $out"
			return 0
		fi
		if grep -qE "10\.77\.9\.2:$port -> " <<<"$(in_h2 "$SROCE" session show sroce2)"; then
			fail "another socket bound port $port while a session of sroce2 uses it"
		fi
		log "port $port was released meanwhile (its session got a fresh port): again"
	done
	fail "the session ports changed under five binds in a row"
}
held_port_refused

# Cut the w link both ways mid-transfer, then restore it. The packets in
# flight on w's session are all lost, so no later packet on it arrives to
# show them lost: its own retransmit timer resends them on v, before the
# QP's transport timer would (a session's period is at most half the
# RTO).
session_timeouts() { cat /sys/class/infiniband/sroce2/ports/1/hw_counters/mp_session_timeouts; }
st0=$(session_timeouts)
for n in 1 2; do in_ns "h$n" tc qdisc add dev "w$n" root netem loss 100%; done
log "w1-w2 cut (netem loss 100%)"
sessions_until " (down|probing) policy" "during the cut"
log "sessions of sroce2 during the cut:"$'\n'"$LIST"
assert_match "$LIST" " (down|probing) policy" "a session is down while its link is cut"
st=$(($(session_timeouts) - st0))
log "sroce2: session timers expired $st times during the cut"
((st > 0)) || fail "no session timer of sroce2 expired while w was cut mid-transfer"
for n in 1 2; do in_ns "h$n" tc qdisc del dev "w$n" root; done
log "w1-w2 restored"
end_stream "ib_write_bw across the cut, although one link stayed up"
dw=$DW
log "w2 carried $dw bytes after the link came back"
((dw > 100 * KIB)) || fail "traffic did not return to the restored link (w2 +$dw bytes)"
after=$(held_ports)
assert_eq "$after" 0 "session ports released with the QPs"

# Both links cut for about four transport timeouts: nowhere to fail over
# to, so each timeout spends a retry of the session it is charged to. Each
# session has the QP's own retry count (perftest's 7: six each, as the
# group counts them), set at RTS, so the stream outlives the cut and moves
# again when the links are back. (The group is built at RTR, before the
# QP's retry count is known; it once kept a budget of 0, and the second
# timeout of a cut failed the QP with RETRY_EXC_ERR.)
start_write_bw
t0=$(cat /sys/class/infiniband/sroce2/ports/1/hw_counters/local_ack_timeout_err)
for n in 1 2; do
	in_ns "h$n" tc qdisc add dev "v$n" root netem loss 100%
	in_ns "h$n" tc qdisc add dev "w$n" root netem loss 100%
done
log "both links cut"
deadline=$((SECONDS + 60))
while t=$(($(cat /sys/class/infiniband/sroce2/ports/1/hw_counters/local_ack_timeout_err) - t0)) &&
	((t < 4 && SECONDS < deadline)); do
	kill -0 "$CLI" 2>/dev/null || stream_failed "with both links cut, after $t timeouts"
	sleep 0.1
done
log "sessions of sroce2 after $t timeouts with both links cut:"$'\n'"$(in_h2 "$SROCE" session show sroce2)"
((t >= 4)) || fail "only $t transport timeouts in 60 s with both links cut"
for n in 1 2; do
	in_ns "h$n" tc qdisc del dev "v$n" root
	in_ns "h$n" tc qdisc del dev "w$n" root
done
log "both links restored"
end_stream "ib_write_bw across a cut of both links for $t transport timeouts"

# Take the w link down (administratively, on the client's side; the peer
# end loses carrier) mid-transfer: the link event marks the sessions on it
# down at once and the unacknowledged requests are resent on the other
# link without waiting for a timeout; traffic returns when it is back up.
# There is a failover to time only if the session on w holds
# unacknowledged requests when the event is seen: a request whose packets
# and ACK crossed before the cut leaves it with none, and traffic simply
# goes on over v. So w drops the client's packets first (its requests stay
# unacknowledged), then goes down.
start_write_bw
sleep 1
in_ns h2 tc qdisc add dev w2 root netem loss 100%
in_ns h2 ip link set w2 down
in_ns h2 tc qdisc del dev w2 root
log "w2 down"
sessions_until " (down|probing) policy" "with w2 down"
log "sessions of sroce2 with w2 down:"$'\n'"$LIST"
assert_match "$LIST" " (down|probing) policy" "a session is down while its link is down"
# The failover time is known once traffic moved again on the other link.
deadline=$((SECONDS + 30))
while res=$(rdma -dd resource show qp link sroce2/1 2>&1 || true)
	fo=$({ grep -oE 'last_failover_us [0-9]+' <<<"$res" || true; } | awk '{ print $2 }' | sort -n | tail -n 1)
	[[ -z $fo ]] && ((SECONDS < deadline)); do
	kill -0 "$CLI" 2>/dev/null || stream_failed "with w2 down"
	sleep 0.2
done
[[ -n $fo ]] || { stuck_state; fail "no failover time reported in rdma -dd resource show qp: $res"; }
log "failover after the link went down took $((fo / 1000)) ms (3 x RTO = $((3 * RTO_MS)) ms)"
in_ns h2 ip link set w2 up
log "w2 up"
end_stream "ib_write_bw across a link going down"
dw=$DW
log "w2 carried $dw bytes after it came back up"
((dw > 100 * KIB)) || log "diagnostics: $(in_ns h2 ip route show 10.77.9.1 | tr '\n' ' ') sessions: $(in_h2 "$SROCE" session show sroce2 | tr '\n' ' ')"
((dw > 100 * KIB)) || fail "traffic did not return to the link that came back (w2 +$dw bytes)"

# The largest group: 64 sessions, each with its own held port.
for d in sroce1 sroce2; do
	assert_ok "$SROCE" dev set "$d" group-size 64 policy round-robin reorder-guard off
done
start_write_bw
# Round-robin per message: every session carries a message within 64.
sessions_until "^sroce2 qp [0-9]+ session 63 .* tx [1-9]" "over 64 sessions"
list=$LIST
held=$(held_ports)
log "64-session group: $(wc -l <<<"$list") sessions listed, $(awk '{ print $6 }' <<<"$list" | sort -u | wc -l) distinct 5-tuples, $held ports held in h2"
assert_eq "$(wc -l <<<"$list")" 64 "64 sessions listed"
assert_eq "$(awk '{ print $6 }' <<<"$list" | sort -u | wc -l)" 64 "64 distinct 5-tuples"
assert_eq "$held" 63 "63 extra-session ports held in h2"
end_stream "ib_write_bw over 64 sessions"
busy=$(awk '$12 == "tx" && $13 > 0' <<<"$list" | wc -l)
log "sessions that carried packets: $busy of 64"
((busy >= 60)) || fail "round-robin used only $busy of 64 sessions"

# UD: a UD QP's datagrams to one destination go out on that destination's
# group (its address handle's), here two sessions sprayed round-robin over
# both links; the payload-checked ping-pong still passes.
for d in sroce1 sroce2; do
	assert_ok "$SROCE" dev set "$d" group-size 2 policy round-robin reorder-guard off
done
v0=$(tx h2 v2) w0=$(tx h2 w2)
start_stream ib_send_bw -c UD -s 1024
sessions_count_until "$live" 2 "ib_send_bw -c UD over a two-session group"
list=$LIST
log "UD sessions of sroce2:"$'\n'"$list"
end_stream "ib_send_bw -c UD over a two-session group"
dv=$(($(tx h2 v2) - v0)) dw=$(($(tx h2 w2) - w0))
log "UD client's bytes: v2 +$dv, w2 +$dw"
n=$(grep -cE "$live" <<<"$list" || true)
((n >= 2)) || fail "the UD QP's group does not list two sessions carrying datagrams"
((dv > 200 * KIB && dw > 200 * KIB)) || fail "UD datagrams did not use both links (v2 +$dv, w2 +$dw bytes)"
run_pair h1 "ibv_ud_pingpong -d sroce1 -g $g1 -n 50 -s 1024 -c" \
	h2 "ibv_ud_pingpong -d sroce2 -g $g2 -n 50 -s 1024 -c 10.77.9.1"
assert_match "$CLIENT_OUT" "50 iters in" "ibv_ud_pingpong over a two-session group"

# An idle QP: its link goes down and comes back while nothing is posted.
# The link event marks its sessions there down; with nothing outstanding
# no message can serve as a canary, so duplicate probes (zero-length WRITE
# at the last acknowledged PSN) must bring them back up.
# Session events for what follows (sroce monitor, as text and as JSON, in
# h1, where sroce1's net device is).
bg_in h1 "$TEST_TMP/monitor.log" "$SROCE" monitor
MON=$BG_PID
bg_in h1 "$TEST_TMP/monitor-json.log" "$SROCE" -j monitor
MONJ=$BG_PID
for f in monitor monitor-json; do
	retry 20 grep -q '^monitoring sroce-events' "$TEST_TMP/$f.log" ||
		fail "sroce monitor did not start: $(cat "$TEST_TMP/$f.log")"
done
bg_in - "$TEST_TMP/idle.log" "$SROCE_BIN/rc_idle" sroce1 "$g1" sroce2 "$g2" 12
IDLE=$BG_PID
for _ in $(seq 100); do grep -q '^idle qpn' "$TEST_TMP/idle.log" && break; sleep 0.1; done
grep -q '^idle qpn' "$TEST_TMP/idle.log" || fail "rc_idle did not connect: $(cat "$TEST_TMP/idle.log")"
qpa=$(awk '/^idle qpn/ { print $3 }' "$TEST_TMP/idle.log")
idle_sessions() { in_h1 "$SROCE" session show sroce1 | grep "^sroce1 qp $qpa "; }
in_ns h2 ip link set w2 down
# Until the link event marked the session down (at most 10 s).
for _ in $(seq 50); do
	list=$(idle_sessions)
	grep -qE ' (down|probing) policy' <<<"$list" && break
	sleep 0.2
done
log "idle QP $qpa with w2 down:"$'\n'"$list"
assert_match "$list" " (down|probing) policy" "an idle QP's session is down while its link is down"
in_ns h2 ip link set w2 up
up=0
for _ in $(seq 40); do
	list=$(idle_sessions)
	if ! grep -qE ' (down|probing) policy' <<<"$list"; then
		up=1
		break
	fi
	sleep 0.1
done
log "idle QP $qpa after w2 came back:"$'\n'"$list"
((up)) || fail "the idle QP's session did not come back up (duplicate probes)"
# The monitor saw the session go down (or probing) and come back up.
ev='' last=''
for _ in $(seq 50); do
	ev=$(grep "^event sroce1 qp $qpa " "$TEST_TMP/monitor.log" || true)
	sid=$(grep -m1 -E ' (down|probing) policy' <<<"$ev" | awk '{ print $6 }')
	last=$(grep "^event sroce1 qp $qpa session ${sid:-x} " <<<"$ev" | tail -n 1)
	[[ $last == *" up policy "* ]] && break
	sleep 0.1
done
log "sroce monitor, events of QP $qpa:"$'\n'"$ev"
[[ -n $sid ]] || fail "sroce monitor saw no down or probing event of the idle QP"
[[ $last == *" up policy "* ]] || fail "sroce monitor saw no up event after w2 came back: $last"
python3 -c 'import json, sys
ev = [json.loads(l) for l in sys.stdin if l.startswith("{")]
ev = [e for e in ev if e["qpn"] == int(sys.argv[1]) and e["session"] == int(sys.argv[2])]
assert ev and ev[-1]["state"] == "up" and any(e["state"] in ("down", "probing") for e in ev), ev' \
	"$qpa" "$sid" <"$TEST_TMP/monitor-json.log" ||
	fail "sroce -j monitor: $(cat "$TEST_TMP/monitor-json.log")"
kill "$MON" "$MONJ" 2>/dev/null || true
rc=0
wait "$IDLE" || rc=$?
sed 's/^/#   /' "$TEST_TMP/idle.log"
((rc == 0)) || fail "rc_idle failed ($rc)"
