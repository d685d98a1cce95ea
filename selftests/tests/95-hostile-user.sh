#!/bin/bash
# What an unprivileged process can make the kernel do, bounded
# (selftests/progs/hostile_user):
#   - a CQ overrun is reported once (one CQ error event, the QP fatal and
#     in ERR), and completions dropped on the overrun CQ afterwards cost no
#     event and no kernel memory;
#   - a thread that keeps a ring's producer index moving cannot keep the
#     kernel in a loop over that ring: moving the QP to ERR (which flushes
#     the ring) and querying it return meanwhile, and no task hangs; the
#     same for an SRQ kept full of receive WQEs that do not parse, under
#     SENDs that keep looking for a receive (each retires a bounded number
#     in error), while the receiving QP is destroyed;
#   - queues count as the process's pinned memory (RLIMIT_MEMLOCK): with
#     a low limit and without CAP_IPC_LOCK, QP creation stops with ENOMEM.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's limits"
two_devices
g1=$G1

slab_kib() { awk '/^Slab:/ {print $2}' /proc/meminfo; }

run_prog() { # MODE SECONDS
	local out rc=0
	out=$(in_h1 timeout 120 "$SROCE_BIN/hostile_user" "$1" sroce1 "$g1" "$2" 2>&1) || rc=$?
	printf '%s\n' "$out"
	((rc == 0)) || fail "hostile_user $1 exited $rc"
	assert_contains "$out" "all checks passed" "hostile_user $1"
}

slab0=$(slab_kib)
run_prog cq-overrun 10
slab1=$(slab_kib)
log "Slab: $slab0 kB before, $slab1 kB after 10 s of completions dropped on an overrun CQ"
# Without the fix each dropped completion queued an async event: hundreds
# of MB in seconds. What remains is noise (other caches), far below that.
((slab1 - slab0 < 32 * 1024)) || fail "slab grew by $(((slab1 - slab0) / 1024)) MB"

run_prog ring-spin 30
run_prog srq-spin 30
if dmesg | grep -E 'blocked for more than|hung_task|soft lockup'; then
	fail "a task hung while the ring index was moving"
fi
# Root without CAP_IPC_LOCK is held to RLIMIT_MEMLOCK like anyone.
out=$(in_h1 bash -c "ulimit -l 4096 && exec setpriv --bounding-set=-ipc_lock \
	timeout 120 $SROCE_BIN/hostile_user ring-limit sroce1 $g1" 2>&1) || true
printf '%s\n' "$out"
assert_contains "$out" "all checks passed" "hostile_user ring-limit"
del_link sroce1
del_link sroce2
