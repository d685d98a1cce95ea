#!/bin/bash
# Hand-offs to the other CPU, with one pass thread pinned to each CPU:
# - a streaming process's doorbell leaves its pass to a pass thread on
#   another CPU whichever CPU it posts from: the QP's own thread, or else
#   its partner (with only its own thread, a process on that thread's CPU
#   would never hand off);
# - the receiver of a stream of unsignaled 4 KiB WRITEs leaves most of its
#   packets to a pass thread (counter rcvd_worker_handoffs) instead of
#   running a pass in the receive softirq for each (rcvd_softirq_passes);
# - a ping-pong (ib_write_lat: every message signaled and waited for)
#   keeps its packets in the softirq: a hop would add a wake-up to each
#   round trip.
# Data is checked by perftest's own completions (a lost or misplaced
# packet fails the run).
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's pass threads"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
(($(getconf _NPROCESSORS_ONLN) >= 2)) || skip "needs two CPUs"
require_module_file
load_sroce
on_exit unload_sroce
two_hosts
link_devices 10.77.1.1 10.77.1.2
g1=$G1 g2=$G2

# One thread per CPU: sroce_pass/N on CPU N mod 2.
for d in $(pass_threads); do
	n=$(sed 's|sroce_pass/||' "$d/comm")
	taskset -pc $((n % 2)) "${d#/proc/}" >/dev/null || fail "taskset -pc $((n % 2)) ${d#/proc/} ($(cat "$d/comm"))"
done
(($(pass_threads | wc -l) >= 2)) || fail "fewer than two pass threads on a two-CPU machine"

# counters DEV: "name value" lines of DEV's counters.
counters() { local f; for f in /sys/class/infiniband/$1/ports/1/hw_counters/*; do echo "${f##*/} $(cat "$f")"; done; }
# moved BEFORE AFTER NAME: how much counter NAME moved.
moved() { echo $(($(awk -v n="$3" '$1 == n {print $2}' <<<"$2") - $(awk -v n="$3" '$1 == n {print $2}' <<<"$1"))); }

# run TOOL SIZE N CPU WHAT: N messages of SIZE bytes, client (sroce2) on
# CPU; sets C1/D1 (sroce1 before/after) and C2/D2 (sroce2).
run() {
	C1=$(counters sroce1) C2=$(counters sroce2)
	run_pair h1 "$1 -d sroce1 -x $g1 -s $2 -n $3 -F" \
		h2 "taskset -c $4 $1 -d sroce2 -x $g2 -s $2 -n $3 -F 10.77.1.1"
	assert_perftest_row "$2" "$3" "$1 result line, $5"
	D1=$(counters sroce1) D2=$(counters sroce2)
}

for cpu in 0 1; do
	run ib_write_bw 64 5000 "$cpu" "64-byte stream posted from CPU $cpu"
	h=$(moved "$C2" "$D2" doorbell_handoffs)
	note "ib_write_bw -s 64 from CPU $cpu: doorbell_handoffs +$h"
	((h > 0)) || fail "no doorbell of a stream posted from CPU $cpu left its pass to a pass thread on the other CPU"
done

run ib_write_bw 4096 2000 0 "4 KiB WRITE stream"
w=$(moved "$C1" "$D1" rcvd_worker_handoffs) s=$(moved "$C1" "$D1" rcvd_softirq_passes)
note "ib_write_bw -s 4096, receiver: rcvd_worker_handoffs +$w, rcvd_softirq_passes +$s"
((w > s)) || fail "the receiver of a 4 KiB WRITE stream ran $s softirq passes and left $w packets to a pass thread (most should be left)"

run ib_write_lat 8 1000 0 "8-byte ping-pong"
w=$(moved "$C1" "$D1" rcvd_worker_handoffs) s=$(moved "$C1" "$D1" rcvd_softirq_passes)
note "ib_write_lat -s 8, server: rcvd_worker_handoffs +$w, rcvd_softirq_passes +$s"
((s > w)) || fail "a ping-pong's server left $w packets to a pass thread and ran $s softirq passes (most should run in the softirq)"
