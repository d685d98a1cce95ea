#!/bin/bash
# The sessions benchmark, run inside the VM by `run.sh --bench-sessions`:
# two paths between the hosts (selftests/lib.sh multipath_hosts), each
# shaped by tc; prints the RDMA WRITE throughput of two-session groups
# over one session (two QPs, hashed or each spreading; one QP over two
# equal links, with 64 KiB and 1 MiB messages; one QP over links of
# unequal rate against their sum), one QP's goodput with 1% loss
# on one link against rxe's, and the failover time when one path is cut
# mid-transfer. Throughputs are medians of SROCE_BENCH_REPEATS runs
# (default 3; every run's figure is printed beside). A benchmark: prints,
# asserts nothing.
set -uo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# A benchmark reports failures as n/a instead of stopping.
set +e

exec 2>&1
RATE=${SROCE_BENCH_RATE:-40mbit}
SECS=${SROCE_BENCH_SECS:-8}
SROCE=$SROCE_BIN/sroce
echo "sroce bench: sessions, $(uname -r), $(nproc) CPUs, each path shaped to $RATE"

load_sroce
multipath_hosts
# Receive flow steering (RPS) on the four veths, over every CPU: each
# flow's packets are taken on one CPU, as a NIC's receive-side scaling
# keeps a flow on one queue. Without it a veth hands each packet to the
# receive backlog of the CPU that sent it, a path reorders its own
# packets, and the multipath transport (which presumes a path delivers in
# order) resends some needlessly and cuts its windows: session 22 measured
# the rows of one QP over both links at 1.65-1.90 so, every resend taken
# twice by the responder (duplicate_request) and no packet dropped on the
# links. SROCE_BENCH_RPS=0 turns it off; another value is the CPU mask.
RPS=${SROCE_BENCH_RPS:-$(printf '%x' $(((1 << $(nproc)) - 1)))}
for n in 1 2; do
	for l in v w; do
		in_ns "h$n" sh -c "echo $RPS >/sys/class/net/$l$n/queues/rx-0/rps_cpus"
	done
done
echo "# receive flow steering on the veths: CPU mask $(in_ns h1 cat /sys/class/net/v1/queues/rx-0/rps_cpus)"
# shape LINK RATE [LOSS]: both ends of link v or w shaped to RATE, the
# h2-to-h1 direction (the data's) losing LOSS of its packets.
shape() {
	local n
	for n in 1 2; do
		in_ns "h$n" tc qdisc del dev "$1$n" root 2>/dev/null
		if [[ -n ${3:-} && $n == 2 ]]; then
			in_ns "h$n" tc qdisc add dev "$1$n" root handle 1: netem loss "$3"
			in_ns "h$n" tc qdisc add dev "$1$n" parent 1: handle 2: tbf rate "$2" burst 64kb latency 3s
		else
			in_ns "h$n" tc qdisc add dev "$1$n" root tbf rate "$2" burst 64kb latency 3s
		fi
	done
}
shape v "$RATE"
shape w "$RATE"
link_devices 10.77.9.1 10.77.9.2
g1=$G1 g2=$G2

GROUP=
group() { # SIZE POLICY GUARD
	local d
	GROUP="group-size $1 $2"
	for d in sroce1 sroce2; do "$SROCE" dev set "$d" group-size "$1" policy "$2" reorder-guard "$3"; done
}

# The client's transport counters each sroce run moves, printed as a
# comment line (where a row's time went: timeouts, resends, full windows).
# Then what the receiving side (sroce1) dropped or took twice, and what the
# links' qdiscs (h2's egress) and net devices (h1's ingress) dropped.
row_counters="local_ack_timeout_err mp_session_timeouts mp_selective_resends mp_resends_skipped mp_window_cuts mp_window_full mp_flowlet_switches mp_replaced"
rx_counters="duplicate_request mp_hold_dropped rcvd_drop_qp_full rcvd_drop_nomem"
hwc() { cat "/sys/class/infiniband/${2:-sroce2}/ports/1/hw_counters/$1" 2>/dev/null || echo 0; }
# Packets dropped on the links: h2's qdiscs and h1's net devices.
link_drops() {
	local q d
	q=$(in_ns h2 tc -s qdisc show 2>/dev/null | awk '/dropped/ { gsub(",", "", $7); n += $7 } END { print n + 0 }')
	d=$(in_ns h1 cat /sys/class/net/v1/statistics/rx_dropped /sys/class/net/w1/statistics/rx_dropped 2>/dev/null | awk '{ n += $1 } END { print n + 0 }')
	echo "$q $d"
}

# write_bw QPS [DEV1 GID1 DEV2 GID2 ADDR]: MB/s of an ib_write_bw -D $SECS
# run over QPS queue pairs from h2 to h1 (n/a on error); sroce1/sroce2
# over the service addresses by default.
# Messages of $BW_SIZE bytes (64 KiB by default).
write_bw() {
	local d1=${2:-sroce1} x1=${3:-$g1} d2=${4:-sroce2} x2=${5:-$g2} addr=${6:-10.77.9.1}
	local size=${BW_SIZE:-65536} c
	local -A base
	for c in $row_counters; do base[$c]=$(hwc "$c"); done
	for c in $rx_counters; do base[rx_$c]=$(hwc "$c" sroce1); done
	local drops0 drops1
	read -r drops0 drops1 <<<"$(link_drops)"
	in_ns h1 timeout 60 ib_write_bw -d "$d1" -x "$x1" -q "$1" -D "$SECS" -s "$size" -F >"$TEST_TMP/srv" 2>&1 &
	local srv=$! t=0
	until in_ns h1 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
	in_ns h2 timeout 60 ib_write_bw -d "$d2" -x "$x2" -q "$1" -D "$SECS" -s "$size" -F "$addr" >"$TEST_TMP/cli" 2>&1
	local rc=$?
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	# Void figures (lib.sh perftest_clock_failed): the run again, twice at
	# most.
	if ((rc == 0 && ${_clock_tries:-0} < 2)) && perftest_clock_failed "$TEST_TMP/cli"; then
		_clock_tries=$((${_clock_tries:-0} + 1)) write_bw "$@"
		return
	fi
	if [[ $d2 == sroce2 ]]; then
		local q d
		read -r q d <<<"$(link_drops)"
		echo "# $1 QP(s), $size B, $GROUP: $(for c in $row_counters; do printf '%s +%s ' "$c" "$(($(hwc "$c") - ${base[$c]}))"; done)" >&2
		echo "#   sroce1: $(for c in $rx_counters; do printf '%s +%s ' "$c" "$(($(hwc "$c" sroce1) - ${base[rx_$c]}))"; done)qdisc drops +$((q - drops0)) rx_dropped +$((d - drops1))" >&2
	fi
	((rc == 0)) || { echo n/a; return; }
	awk -v s="$size" '$1 == s && NF >= 4 { v = $4 } END { print (v == "" ? "n/a" : v) }' "$TEST_TMP/cli"
}

# measure NAME QPS [...]: write_bw QPS ... $REPEATS times; NAME gets the
# median (a failed run counts as 0), RUNS[NAME] every figure.
REPEATS=${SROCE_BENCH_REPEATS:-3}
declare -A RUNS
measure() {
	local name=$1 i
	shift
	local -a all=()
	for ((i = 0; i < REPEATS; i++)); do all+=("$(write_bw "$@")"); done
	RUNS[$name]="${all[*]}"
	local med
	# A failed run counts as 0 (the lowest); a median of 0 is n/a.
	read -r med _ <<<"$(printf '%s\n' "${all[@]}" | sed 's#^n/a$#0#' | median_spread)"
	[[ $med == 0 ]] && med=n/a
	printf -v "$name" '%s' "$med"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else print "n/a" }'; }
# Two QPs: with one session each both may hash onto one link; with two
# sessions each, the hash policy puts consecutive QPs on different links.
group 1 hash on
measure one2 2
group 2 hash on
measure two2 2
# The same two QPs each spreading over both links (multipath transport,
# least-outstanding): where the hash put them no longer matters.
group 2 least-outstanding off
measure two2_lo 2
# One QP: round-robin per message over two links; the two sroce peers
# agree on the multipath transport (the responder holds what arrives
# early, SACKs; selective resends).
group 1 hash on
measure one1 1
group 2 round-robin off
measure two1 1
# One QP, 1 MiB messages (1024 packets, more than a session's congestion
# window): each message continues on the other session when its own
# window is full (flowlets within a message).
group 1 hash on
BW_SIZE=1048576 measure one1_big 1
group 2 round-robin off
BW_SIZE=1048576 measure two1_big 1
# Links of unequal rate: one session on v shaped to each rate, then one QP
# over both (least-outstanding: each session gets messages as its queue
# drains) against the sum.
SLOW_RATE=${SROCE_BENCH_SLOW_RATE:-20mbit}
group 1 hash on
shape v "$SLOW_RATE"
measure one_slow 1
shape v "$RATE"
shape w "$SLOW_RATE"
group 2 least-outstanding off
measure uneq 1
shape w "$RATE"
sum_uneq=$(awk -v a="$one1" -v b="$one_slow" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a + b; else print "n/a" }')
# 1% loss on link v (h2 to h1): sroce one QP over both links, and with one
# session (v only, as rxe below).
LOSS=${SROCE_BENCH_LOSS:-1%}
shape v "$RATE" "$LOSS"
group 2 round-robin off
measure lossy_two 1
group 1 hash on
measure lossy_one 1
shape v "$RATE"

# (The shaper's queue holds the perftest window, 128 x 64 KiB: RoCE
# expects a lossless fabric; only the multipath transport has congestion
# windows.)

# Failover is measured on unshaped links, with two sessions per QP: a
# shaper's deep queue makes the RTT exceed the RTO by itself.
group 2 round-robin off
for n in 1 2; do
	for l in v w; do in_ns "h$n" tc qdisc del dev "$l$n" root; done
done

# Failover: a long transfer on two sessions; cut path w (netem 100% loss,
# both ways) and time until a session of the client QP is reported down,
# and until the live session has carried 100 more packets.
in_ns h1 timeout 90 ib_write_bw -d sroce1 -x "$g1" -D 30 -s 65536 -F >"$TEST_TMP/srv" 2>&1 &
srv=$!
t=0
until in_ns h1 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
# What the failover stream moves of sroce2's transport counters.
fo_counters="local_ack_timeout_err retry_exceeded_err completer_retry_err mp_selective_resends mp_resends_skipped mp_window_cuts mp_window_full mp_flowlet_switches"
declare -A fo_base
for c in $fo_counters; do fo_base[$c]=$(hwc "$c"); done
in_ns h2 timeout 90 ib_write_bw -d sroce2 -x "$g2" -D 30 -s 65536 -F 10.77.9.1 >"$TEST_TMP/cli" 2>&1 &
cli=$!
sleep 4
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Listed only in the namespace of the device's net device.
sessions() { in_ns h2 "$SROCE" session show sroce2; }
t0=$(now_ms)
for n in 1 2; do in_ns "h$n" tc qdisc replace dev "w$n" root netem loss 100%; done
detect=n/a resume=n/a
live0=
while (($(now_ms) - t0 < 10000)); do
	list=$(sessions)
	if [[ $detect == n/a ]] && grep -qE " (down|probing) policy" <<<"$list"; then
		detect=$(($(now_ms) - t0))
		live0=$(awk '/ up policy/ { print $15; exit }' <<<"$list")
	fi
	if [[ $detect != n/a && -n $live0 ]]; then
		live=$(awk '/ up policy/ { print $15; exit }' <<<"$list")
		if [[ -n $live ]] && ((live > live0 + 100)); then
			resume=$(($(now_ms) - t0))
			break
		fi
	fi
	sleep 0.01
done
# The kernel's own measure: from the stall (the oldest unacknowledged
# request's first send, or the last completion if later) to the first
# completion after resending on the other session.
failover_us() { # last_failover_us or max_failover_us
	rdma -dd resource show qp link sroce2/1 2>/dev/null |
		grep -oE "$1 [0-9]+" | awk '{ print $2 }' | sort -n | tail -n 1
}
# The longest: a cut path's sessions may bounce (a canary fails and is
# resent again), each a short failover after the first.
fo_cut=$(failover_us max_failover_us)
for n in 1 2; do in_ns "h$n" tc qdisc del dev "w$n" root; done
# Then the same link taken down: the link event fails the session over.
sleep 4
in_ns h2 ip link set w2 down
sleep 2
fo_down=$(failover_us last_failover_us)
in_ns h2 ip link set w2 up
wait "$cli"
cli_rc=$?
((cli_rc == 0)) || { echo "# the stream's client:"; grep -vE '^ *(#|-|\*|[0-9])|^ *$' "$TEST_TMP/cli" | tail -8 | sed 's/^/#   /'; }
echo "# sroce2's counters moved by the failover stream: $(for c in $fo_counters; do printf '%s +%s ' "$c" "$(($(hwc "$c") - ${fo_base[$c]}))"; done)"
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null

# Link flaps: a 30 s stream while link w goes down for 2 s and comes back,
# SROCE_BENCH_FLAPS times (default 4). Each time the multipath route
# rehashes its flows, and a link just back up drops what it is given
# until the kernel has activated it (session 20's module failed such a
# stream about once in three).
FLAPS=${SROCE_BENCH_FLAPS:-4}
flap_result=n/a
if ((FLAPS > 0)); then
	in_ns h1 timeout 90 ib_write_bw -d sroce1 -x "$g1" -D 30 -s 65536 -F >"$TEST_TMP/srv" 2>&1 &
	srv=$!
	t=0
	until in_ns h1 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
	in_ns h2 timeout 90 ib_write_bw -d sroce2 -x "$g2" -D 30 -s 65536 -F 10.77.9.1 >"$TEST_TMP/cli" 2>&1 &
	cli=$!
	sleep 4
	for ((f = 0; f < FLAPS; f++)); do
		in_ns h2 ip link set w2 down
		sleep 2
		in_ns h2 ip link set w2 up
		sleep 3
	done
	wait "$cli"
	flap_rc=$?
	if ((flap_rc == 0)); then
		flap_result=completed
	else
		flap_result="failed ($flap_rc)"
		grep -vE '^ *(#|-|\*|[0-9])|^ *$' "$TEST_TMP/cli" | tail -4 | sed 's/^/#   /'
	fi
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
fi

# rxe, one QP over link v (its only path: rxe takes packets only from the
# net device it is bound to) with the same loss, in the same VM run.
lossy_rxe=n/a
if [[ -f ${RXE_KO:-} ]]; then
	for d in sroce1 sroce2; do rdma link delete "$d" 2>/dev/null; done
	unload_sroce
	load_rxe
	in_ns h1 rdma link add rxe1 type rxe netdev v1 && in_ns h2 rdma link add rxe2 type rxe netdev v2
	wait_port_active rxe1
	wait_port_active rxe2
	r1=$(gid_index rxe1 10.77.1.1) r2=$(gid_index rxe2 10.77.1.2)
	shape v "$RATE" "$LOSS"
	measure lossy_rxe 1 rxe1 "$r1" rxe2 "$r2" 10.77.1.1
	shape v "$RATE"
	for d in rxe1 rxe2; do rdma link delete "$d" 2>/dev/null; done
	unload_rxe
fi

echo
printf '%-58s %s  [%s]\n' "2 QPs, 1 session each (MB/s)" "$one2" "${RUNS[one2]:-}"
printf '%-58s %s  [%s]\n' "2 QPs, 2 sessions each, hash (MB/s)" "$two2" "${RUNS[two2]:-}"
printf '%-58s %s (goal >= 1.8)\n' "  ratio" "$(ratio "$one2" "$two2")"
printf '%-58s %s  [%s]\n' "2 QPs, 2 sessions each, multipath, least-outst. (MB/s)" "$two2_lo" "${RUNS[two2_lo]:-}"
printf '%-58s %s (goal >= 1.8)\n' "  ratio" "$(ratio "$one2" "$two2_lo")"
printf '%-58s %s  [%s]\n' "1 QP, 1 session (MB/s)" "$one1" "${RUNS[one1]:-}"
printf '%-58s %s  [%s]\n' "1 QP, 2 sessions, multipath, round-robin (MB/s)" "$two1" "${RUNS[two1]:-}"
printf '%-58s %s (goal >= 1.8)\n' "  ratio" "$(ratio "$one1" "$two1")"
printf '%-58s %s  [%s]\n' "1 QP, 1 session, 1 MiB messages (MB/s)" "$one1_big" "${RUNS[one1_big]:-}"
printf '%-58s %s  [%s]\n' "1 QP, 2 sessions, multipath, 1 MiB messages (MB/s)" "$two1_big" "${RUNS[two1_big]:-}"
printf '%-58s %s (goal >= 1.8)\n' "  ratio" "$(ratio "$one1_big" "$two1_big")"
printf '%-58s %s  [%s]\n' "1 QP, 1 session, link at $SLOW_RATE (MB/s)" "$one_slow" "${RUNS[one_slow]:-}"
printf '%-58s %s  [%s]\n' "1 QP, 2 sessions, links at $RATE + $SLOW_RATE, least-outst. (MB/s)" "$uneq" "${RUNS[uneq]:-}"
printf '%-58s %s (goal >= 0.9)\n' "  ratio to the sum of one session on each ($sum_uneq)" "$(ratio "$sum_uneq" "$uneq")"
printf '%-58s %s  [%s]\n' "$LOSS loss on v: sroce 1 QP, 2 sessions, multipath (MB/s)" "$lossy_two" "${RUNS[lossy_two]:-}"
printf '%-58s %s  [%s]\n' "$LOSS loss on v: sroce 1 QP, 1 session on v (MB/s)" "$lossy_one" "${RUNS[lossy_one]:-}"
printf '%-58s %s  [%s]\n' "$LOSS loss on v: rxe 1 QP on v (MB/s)" "$lossy_rxe" "${RUNS[lossy_rxe]:-}"
printf '%-58s %s (goal >= 2)\n' "  ratio sroce multipath / rxe" "$(ratio "$lossy_rxe" "$lossy_two")"
printf '%-58s %s ms (RTO 67 ms: perftest timeout 14)\n' "failover: cut to session reported down" "$detect"
printf '%-58s %s ms\n' "failover: cut to 100 packets on the live session" "$resume"
ms() { [[ -n $1 ]] && echo "$(($1 / 1000)) ms ($(awk -v f="$1" 'BEGIN { printf "%.1f", f / 67109 }') x RTO; target <= 3)" || echo n/a; }
printf '%-58s %s\n' "failover, kernel-measured, path cut (100% loss), longest" "$(ms "$fo_cut")"
printf '%-58s %s\n' "failover, kernel-measured, link down" "$(ms "$fo_down")"
printf '%-58s %s\n' "failover: transfer across the cut and the link down" "$([[ $cli_rc == 0 ]] && echo completed || echo "failed ($cli_rc)")"
printf '%-58s %s\n' "transfer across $FLAPS link flaps (w down 2 s, up 3 s)" "$flap_result"
echo "(TCG: absolute figures mean little; detection time includes the CLI's polling)"
touch "$SROCE_RESULTS/bench-ok"
[[ ${SROCE_VM_REBOOT:-0} == 1 ]] && { sync; echo b >/proc/sysrq-trigger; }
