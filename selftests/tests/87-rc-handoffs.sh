#!/bin/bash
# A process streaming small messages leaves its send doorbells' passes to
# the QP's pass thread when that thread runs on another CPU (counter
# doorbell_handoffs; the passes count as thread_passes), so that CPU sends
# while the process goes on posting; with the thread on the process's own
# CPU the doorbell runs the pass itself. A READ stream, whose every READ
# completes inside the doorbell that posts it, is known by its unsignaled
# WQEs posted one after another with nothing received between them; a
# latency test, which signals each WQE and waits for it, never hands off.
# The pass threads and the client are pinned (taskset) so that each case
# is certain: a 64-byte ib_write_bw stream completes either way, and
# verbs_data's bytes check out with the threads on the other CPU (its
# streams hand off where posts are fast enough, below).
#
# Then with one pass thread pinned to each CPU:
# - a stream's doorbells hand off whichever CPU it posts from: the QP's
#   own thread, or else its partner (with its own thread alone, a process
#   on that thread's CPU would never hand off);
# - the receiver of a stream of unsignaled 4 KiB WRITEs leaves most of its
#   packets to a pass thread (rcvd_worker_handoffs) instead of running a
#   pass in the receive softirq for each (rcvd_softirq_passes);
# - a ping-pong (ib_write_lat: every message signaled and waited for)
#   keeps its packets in the softirq: a hop would add a wake-up to each
#   round trip.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's send doorbell"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
(($(getconf _NPROCESSORS_ONLN) >= 2)) || skip "needs two CPUs"
require_module_file
load_sroce
on_exit unload_sroce
two_hosts
link_devices 10.77.1.1 10.77.1.2
g1=$G1 g2=$G2

# pin_pass_threads CPU: every pass thread allowed on CPU only (a thread
# that may not run on the client's CPU is elsewhere at once; a sleeping
# one moves to CPU when it next wakes).
pin_pass_threads() {
	local d
	for d in $(pass_threads); do
		taskset -pc "$1" "${d#/proc/}" >/dev/null || fail "taskset -pc $1 ${d#/proc/} ($(cat "$d/comm"))"
	done
}

# perftest TOOL SIZE N WHAT [CPU]: N messages of SIZE bytes from h2
# (client on CPU, default 0); sets HANDOFFS and PASSES to what sroce2's
# counters moved, RX_LEFT and RX_SOFTIRQ to sroce1's
# rcvd_worker_handoffs and rcvd_softirq_passes.
perftest() {
	local h0 t0 l0 s0
	h0=$(hw_counter sroce2 doorbell_handoffs) t0=$(hw_counter sroce2 thread_passes)
	l0=$(hw_counter sroce1 rcvd_worker_handoffs) s0=$(hw_counter sroce1 rcvd_softirq_passes)
	run_pair h1 "$1 -d sroce1 -x $g1 -s $2 -n $3 -F" \
		h2 "taskset -c ${5:-0} $1 -d sroce2 -x $g2 -s $2 -n $3 -F 10.77.1.1"
	assert_perftest_row "$2" "$3" "$1 result line, $4"
	HANDOFFS=$(($(hw_counter sroce2 doorbell_handoffs) - h0))
	PASSES=$(($(hw_counter sroce2 thread_passes) - t0))
	RX_LEFT=$(($(hw_counter sroce1 rcvd_worker_handoffs) - l0))
	RX_SOFTIRQ=$(($(hw_counter sroce1 rcvd_softirq_passes) - s0))
	note "$1 -s $2, $4: doorbell_handoffs +$HANDOFFS, thread_passes +$PASSES; receiver: rcvd_worker_handoffs +$RX_LEFT, rcvd_softirq_passes +$RX_SOFTIRQ"
}

# stream WHAT: a 64-byte WRITE stream.
stream() { perftest ib_write_bw 64 5000 "$1"; }

pin_pass_threads 1
stream "pass threads on CPU 1"
((HANDOFFS > 0)) || fail "no doorbell left its pass to a pass thread on another CPU"
((PASSES > 0)) || fail "thread_passes +0 after $HANDOFFS hand-offs"
perftest ib_read_bw 64 2000 "pass threads on CPU 1"
((HANDOFFS > 0)) || fail "no doorbell of the READ stream left its pass to a pass thread on another CPU"
perftest ib_read_lat 64 500 "pass threads on CPU 1"
((HANDOFFS == 0)) || fail "$HANDOFFS doorbells of ib_read_lat (each WQE signaled and waited for) left their pass"

# verbs_data's requester is sroce1 (its streams: test_stream).
h0=$(hw_counter sroce1 doorbell_handoffs)
rc=0
out=$(in_h1 timeout 200 taskset -c 0 "$SROCE_BIN/verbs_data" sroce1 "$g1" sroce2 "$g2" 2>&1) || rc=$?
printf '%s\n' "$out" | grep -v '^ok' || true
((rc == 0)) || fail "verbs_data exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
assert_contains "$out" "all checks passed" "verbs_data with the pass threads on the other CPU"
# Not asserted: its streams are short, and a machine slow enough that
# each post outlasts the requester's 1 ms wait before it asks for an ACK
# (the debug kernel) has every earlier WQE acknowledged at each doorbell.
# 78-106 hand-offs on the test kernel, 0 on the debug kernel.
note "verbs_data: sroce1 doorbell_handoffs +$(($(hw_counter sroce1 doorbell_handoffs) - h0))"

pin_pass_threads 0
stream "pass threads on the client's CPU"
# Each thread may take one before its first wake-up moves it to CPU 0
# (the hand-off wakes it), none after.
threads=$(pass_threads | wc -l)
((HANDOFFS <= threads)) || fail "$HANDOFFS doorbell hand-offs with the pass threads on the client's CPU (at most $threads: one per thread before it moves)"

# One thread per CPU: sroce_pass/N on CPU N mod 2.
for d in $(pass_threads); do
	n=$(sed 's|sroce_pass/||' "$d/comm")
	taskset -pc $((n % 2)) "${d#/proc/}" >/dev/null || fail "taskset -pc $((n % 2)) ${d#/proc/} ($(cat "$d/comm"))"
done
((threads >= 2)) || fail "$threads pass threads on a two-CPU machine"
for cpu in 0 1; do
	perftest ib_write_bw 64 5000 "one pass thread per CPU, posted from CPU $cpu" "$cpu"
	((HANDOFFS > 0)) || fail "no doorbell of a stream posted from CPU $cpu left its pass to a pass thread on the other CPU"
done
perftest ib_write_bw 4096 2000 "one pass thread per CPU"
((RX_LEFT > RX_SOFTIRQ)) || fail "the receiver of a 4 KiB WRITE stream ran $RX_SOFTIRQ softirq passes and left $RX_LEFT packets to a pass thread (most should be left)"
perftest ib_write_lat 8 1000 "one pass thread per CPU"
((RX_SOFTIRQ > RX_LEFT)) || fail "a ping-pong's server left $RX_LEFT packets to a pass thread and ran $RX_SOFTIRQ softirq passes (most should run in the softirq)"
