#!/bin/bash
# The reference: the kernel's own rxe between h1 and h2 runs the rdma-core
# and perftest tools sroce must also run. Always uses rxe, whatever
# SROCE_TESTS_TYPE says.
# timeout: 180
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

load_rxe
on_exit unload_rxe
two_hosts
add_link h1 rxe1 v1 rxe
add_link h2 rxe2 v2 rxe
wait_port_active rxe1
wait_port_active rxe2
log "rxe1 GIDs:"
gid_table rxe1 | sed 's/^/#   /'
g1=$(gid_index rxe1 10.77.1.1)
g2=$(gid_index rxe2 10.77.1.2)
log "RoCE v2 GID index for 10.77.1.1 on rxe1: $g1, for 10.77.1.2 on rxe2: $g2"

# RC send/recv through ibv_rc_pingpong (server in h2, client in h1).
run_pair h2 "ibv_rc_pingpong -d rxe2 -g $g2 -n 10" \
	h1 "ibv_rc_pingpong -d rxe1 -g $g1 -n 10 10.77.1.2"
assert_match "$CLIENT_OUT" '10 iters in' "ibv_rc_pingpong client"

# UD too (a different QP type path through the provider).
run_pair h2 "ibv_ud_pingpong -d rxe2 -g $g2 -n 10 -s 512" \
	h1 "ibv_ud_pingpong -d rxe1 -g $g1 -n 10 -s 512 10.77.1.2"
assert_match "$CLIENT_OUT" '10 iters in' "ibv_ud_pingpong client"

# A quick perftest latency run.
run_pair h2 "ib_send_lat -d rxe2 -x $g2 -n 20 -F" \
	h1 "ib_send_lat -d rxe1 -x $g1 -n 20 -F 10.77.1.2"
assert_match "$CLIENT_OUT" 't_avg|#bytes' "ib_send_lat client"

# RDMA write bandwidth, small.
run_pair h2 "ib_write_bw -d rxe2 -x $g2 -n 20 -s 4096 -F" \
	h1 "ib_write_bw -d rxe1 -x $g1 -n 20 -s 4096 -F 10.77.1.2"
assert_match "$CLIENT_OUT" 'BW average|#bytes' "ib_write_bw client"

# rdma_cm: rping (address resolution through the IP stack and the GID table).
bg_in h2 "$TEST_TMP/rping-server.log" rping -s -a 10.77.1.2 -C 3 -S 64
srv=$BG_PID
ok=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
	sleep 0.5
	if in_h1 timeout 30 rping -c -a 10.77.1.2 -C 3 -S 64 -v >"$TEST_TMP/rping-client.log" 2>&1; then
		ok=1
		break
	fi
done
sed 's/^/#   /' "$TEST_TMP/rping-client.log"
((ok)) || fail "rping client did not complete"
assert_contains "$(cat "$TEST_TMP/rping-client.log")" "ping data" "rping client"
wait "$srv" || fail "rping server failed: $(cat "$TEST_TMP/rping-server.log")"
