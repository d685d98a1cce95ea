#!/bin/bash
# The peer goes away in the middle of an RC transfer: its link goes down,
# its process (and so its QP) is killed, its device is removed, its provider
# module is unloaded (sroce's, under an rxe requester). The
# requester (ib_write_bw, which only requests) must fail with the transport
# retry error (status 12, IBV_WC_RETRY_EXC_ERR) within the QP's retry budget
# (perftest: timeout 14 = 67 ms and 7 retries, about half a second), leak
# nothing, and the device must work afterwards.
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

two_devices
g1=$G1 g2=$G2

# start_pair: a long RDMA WRITE stream, server in h1 ($SRV), client in h2
# ($CLI), still running after 3 s.
start_pair() {
	bg_in h1 "$TEST_TMP/server.log" ib_write_bw -d "$DEV1" -x "$g1" -D 100 -s 65536 -F
	SRV=$BG_PID
	wait_listen h1 "$OOB_PORT"
	bg_in h2 "$TEST_TMP/client.log" ib_write_bw -d "$DEV2" -x "$g2" -D 100 -s 65536 -F 10.77.1.1
	CLI=$BG_PID
	sleep 3
	kill -0 "$CLI" 2>/dev/null || fail "client ended early: $(cat "$TEST_TMP/client.log")"
	kill -0 "$SRV" 2>/dev/null || fail "server ended early: $(cat "$TEST_TMP/server.log")"
}

# expect_retry_exceeded WHAT: the client fails with the transport retry
# error within 20 s (generous for TCG; the budget itself is ~0.5 s).
expect_retry_exceeded() {
	local t0=$SECONDS rc=0
	while kill -0 "$CLI" 2>/dev/null && ((SECONDS - t0 < 20)); do sleep 0.1; done
	kill -0 "$CLI" 2>/dev/null && fail "client still running 20 s after $1"
	wait "$CLI" || rc=$?
	log "client after $1 ($((SECONDS - t0)) s): exit $rc: $(tr '\n' ' ' <"$TEST_TMP/client.log")"
	((rc != 0)) || fail "client succeeded after $1"
	# rxe, the reference (and case 4's requester), may report a flush
	# (status 5, IBV_WC_WR_FLUSH_ERR) first: when its own port goes down,
	# and when its retries run out with more work queued.
	local want="Failed status 12"
	[[ $LINK_TYPE == rxe || $DEV2 == rxe* ]] && want="Failed status (5|12)"
	assert_match "$(cat "$TEST_TMP/client.log")" "$want" "retry error after $1"
	kill -9 "$SRV" 2>/dev/null || true
	wait "$SRV" 2>/dev/null || true
}

# hide_server_fin / show_server_fin: when the server process dies (killed,
# or it exits because its device went away), perftest's client notices the
# closed TCP side channel and stops before its requests time out ("Couldn't
# read reports", no completion status): drop the server's TCP segments
# towards the client so that only the RDMA side can end the client.
hide_server_fin() {
	in_ns h2 tc qdisc add dev v2 ingress
	in_ns h2 tc filter add dev v2 parent ffff: protocol ip u32 \
		match ip protocol 6 0xff match ip sport "$OOB_PORT" 0xffff action drop
}
show_server_fin() { in_ns h2 tc qdisc del dev v2 ingress; }

# still_works: a short payload-checked ping-pong succeeds.
still_works() {
	run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $g1 -n 20 -s 4096 -c" \
		h2 "ibv_rc_pingpong -d $DEV2 -g $g2 -n 20 -s 4096 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "20 iters in" "ping-pong after $1"
}

retry0=$(hw_counter_or_0 "$DEV2" retry_exceeded_err)

log "case 1: the server's link goes down"
start_pair
in_ns h1 ip link set v1 down
expect_retry_exceeded "the peer's link went down"
in_ns h1 ip link set v1 up
wait_port_active "$DEV1"
g1=$(gid_index "$DEV1" 10.77.1.1)
still_works "the link came back"

log "case 2: the server process (and its QP) is killed"
start_pair
hide_server_fin
kill -9 "$SRV" 2>/dev/null || {
	rc=0
	wait "$SRV" || rc=$?
	fail "server ended (status $rc) before it was killed: $(tr '\n' ' ' <"$TEST_TMP/server.log"); client: $(tr '\n' ' ' <"$TEST_TMP/client.log"); kernel: $(dmesg | tail -n 20 | tr '\n' ' ')"
}
expect_retry_exceeded "the peer QP was destroyed"
show_server_fin
still_works "the peer QP was destroyed"

if [[ $LINK_TYPE == sroce ]]; then
	retry1=$(hw_counter_or_0 "$DEV2" retry_exceeded_err)
	log "retry_exceeded_err on $DEV2: $retry0 -> $retry1"
	((retry1 - retry0 >= 2)) || fail "retry_exceeded_err moved by $((retry1 - retry0)), expected 2"
fi

log "case 3: the server's device is removed"
start_pair
# The server process may exit when its device goes away (seen in a loaded run).
hide_server_fin
rdma link delete "$DEV1"
expect_retry_exceeded "the peer device was removed"
show_server_fin
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"
g1=$(gid_index "$DEV1" 10.77.1.1)
still_works "the peer device came back"

if [[ $LINK_TYPE == sroce ]]; then
	# The peer's provider module goes away: sroce's, under a server that
	# has the device open (the device is disassociated from the process, so
	# rmmod does not wait for it). The requester that must notice is rxe
	# in h2: sroce's module serves both sides otherwise. (The converse,
	# unloading rdma_rxe under an sroce requester, cannot be tested: sroce
	# reports rxe's driver id so that rdma-core's rxe provider drives it,
	# and rxe's module exit unregisters every device with that id.)
	log "case 4: the server's provider module (sroce) is unloaded"
	rdma link delete "$DEV2"
	load_rxe
	on_exit unload_rxe
	add_link h2 rxe2 v2 rxe
	wait_port_active rxe2
	sroce_dev2=$DEV2 sroce_g2=$g2
	DEV2=rxe2 g2=$(gid_index rxe2 10.77.1.2)
	start_pair
	hide_server_fin
	rc=0
	timeout 60 rmmod "$MOD_NAME" >"$TEST_TMP/rmmod.log" 2>&1 || rc=$?
	((rc == 0)) || fail "rmmod $MOD_NAME under a running server failed ($rc): $(cat "$TEST_TMP/rmmod.log")"
	module_loaded "$MOD_NAME" && fail "$MOD_NAME still loaded"
	# How soon rxe's requester gives up is rxe's business (under TCG it has
	# been seen to go on past 20 s): a note, not a failure of sroce.
	t0=$SECONDS
	while kill -0 "$CLI" 2>/dev/null && ((SECONDS - t0 < 20)); do sleep 0.1; done
	if kill -0 "$CLI" 2>/dev/null; then
		note "rxe's requester was still running 20 s after sroce was unloaded"
		kill -9 "$CLI" "$SRV" 2>/dev/null || true
		wait "$CLI" "$SRV" 2>/dev/null || true
	else
		expect_retry_exceeded "the peer's provider module was unloaded"
	fi
	show_server_fin
	rdma link delete rxe2
	load_sroce
	DEV2=$sroce_dev2
	add_link h1 "$DEV1" v1
	add_link h2 "$DEV2" v2
	wait_port_active "$DEV1"
	wait_port_active "$DEV2"
	g1=$(gid_index "$DEV1" 10.77.1.1)
	g2=$(gid_index "$DEV2" 10.77.1.2)
	still_works "the peer's module was unloaded and loaded again"
	[[ $g2 == "$sroce_g2" ]] || log "GID index of $DEV2 moved: $sroce_g2 -> $g2"
fi

sroce_pins_released "after the peer-gone cases"

