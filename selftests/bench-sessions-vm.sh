#!/bin/bash
# The sessions benchmark, run inside the VM by `run.sh --bench-sessions`:
# two paths between the hosts (selftests/lib.sh multipath_hosts), each
# shaped by tc to the same rate; prints the aggregate RDMA WRITE throughput
# of a two-session group over that of one session, and the failover time
# when one path is cut mid-transfer. A benchmark: prints, asserts nothing.
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
for n in 1 2; do
	for l in v w; do
		in_ns "h$n" tc qdisc add dev "$l$n" root tbf rate "$RATE" burst 64kb latency 3s
	done
done
link_devices 10.77.9.1 10.77.9.2
g1=$G1 g2=$G2

group() { # SIZE POLICY GUARD
	local d
	for d in sroce1 sroce2; do "$SROCE" dev set "$d" group-size "$1" policy "$2" reorder-guard "$3"; done
}

# write_bw QPS: MB/s of an ib_write_bw -D $SECS run over QPS queue pairs
# from h2 to h1 (n/a on error).
write_bw() {
	in_ns h1 timeout 60 ib_write_bw -d sroce1 -x "$g1" -q "$1" -D "$SECS" -s 65536 -F >"$TEST_TMP/srv" 2>&1 &
	local srv=$! t=0
	until in_ns h1 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
	in_ns h2 timeout 60 ib_write_bw -d sroce2 -x "$g2" -q "$1" -D "$SECS" -s 65536 -F 10.77.9.1 >"$TEST_TMP/cli" 2>&1
	local rc=$?
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	((rc == 0)) || { echo n/a; return; }
	awk '$1 == 65536 && NF >= 4 { v = $4 } END { print (v == "" ? "n/a" : v) }' "$TEST_TMP/cli"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else print "n/a" }'; }
# Two QPs: with one session each both may hash onto one link; with two
# sessions each, the hash policy puts consecutive QPs on different links.
group 1 hash on
one2=$(write_bw 2)
group 2 hash on
two2=$(write_bw 2)
# One QP: round-robin per message (no reorder guard) over two links pays
# for reordering with go-back-N (RC accepts only the expected PSN).
group 1 hash on
one1=$(write_bw 1)
group 2 round-robin off
two1=$(write_bw 1)

# (The shaper's queue holds the perftest window, 128 x 64 KiB: RoCE
# expects a lossless fabric, and sroce has no congestion control.)

# Failover is measured on unshaped links: a shaper's deep queue makes the
# RTT exceed the RTO by itself.
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
in_ns h2 timeout 90 ib_write_bw -d sroce2 -x "$g2" -D 30 -s 65536 -F 10.77.9.1 >"$TEST_TMP/cli" 2>&1 &
cli=$!
sleep 4
now_ms() { echo $(($(date +%s%N) / 1000000)); }
sessions() { "$SROCE" session show sroce2; }
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
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null

echo
printf '%-58s %s\n' "2 QPs, 1 session each (MB/s)" "$one2"
printf '%-58s %s\n' "2 QPs, 2 sessions each, hash (MB/s)" "$two2"
printf '%-58s %s (goal >= 1.8)\n' "  ratio" "$(ratio "$one2" "$two2")"
printf '%-58s %s\n' "1 QP, 1 session (MB/s)" "$one1"
printf '%-58s %s\n' "1 QP, 2 sessions, round-robin per message (MB/s)" "$two1"
printf '%-58s %s\n' "  ratio" "$(ratio "$one1" "$two1")"
printf '%-58s %s ms (RTO 67 ms: perftest timeout 14)\n' "failover: cut to session reported down" "$detect"
printf '%-58s %s ms\n' "failover: cut to 100 packets on the live session" "$resume"
ms() { [[ -n $1 ]] && echo "$(($1 / 1000)) ms ($(awk -v f="$1" 'BEGIN { printf "%.1f", f / 67109 }') x RTO; target <= 3)" || echo n/a; }
printf '%-58s %s\n' "failover, kernel-measured, path cut (100% loss), longest" "$(ms "$fo_cut")"
printf '%-58s %s\n' "failover, kernel-measured, link down" "$(ms "$fo_down")"
printf '%-58s %s\n' "failover: transfer across the cut and the link down" "$([[ $cli_rc == 0 ]] && echo completed || echo "failed ($cli_rc)")"
echo "(TCG: absolute figures mean little; detection time includes the CLI's polling)"
touch "$SROCE_RESULTS/bench-ok"
[[ ${SROCE_VM_REBOOT:-0} == 1 ]] && { sync; echo b >/proc/sysrq-trigger; }
