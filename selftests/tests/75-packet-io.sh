#!/bin/bash
# sroce's packet I/O layer, before queue pairs exist: RoCEv2 packets
# handcrafted in Python are received on UDP 4791 (IPv4 and IPv6), their
# ICRC checked (bad ones and runts counted as drops); packets sroce sends
# (debugfs test hook) carry a valid ICRC and the chosen UDP source port,
# are accepted by the peer sroce device and, when rdma_rxe is available, by
# rxe. One receive socket pair per namespace, shared by its devices and
# gone with the last one, or with the module; port 4791 taken by someone
# else makes `rdma link add` fail with EADDRINUSE.
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's own packet I/O hooks"
require_module_file
load_sroce
on_exit unload_sroce
two_hosts

PKT=$SELFTESTS_DIR/progs/roce_pkt.py
DBG=/sys/kernel/debug/sroce

# expect_counter DEV NAME VALUE: waits briefly (the core caches values
# for a few milliseconds and packets are asynchronous).
expect_counter() {
	local dev=$1 name=$2 want=$3 deadline=$((SECONDS + 5)) got
	while :; do
		got=$(hw_counter "$dev" "$name")
		[[ $got == "$want" ]] && return 0
		((SECONDS < deadline)) || fail "$dev $name is $got, expected $want"
		sleep 0.2
	done
}

# sockets NS: how many UDP sockets listen on port 4791 in NS.
sockets() { in_ns "$1" ss -Hlun 'sport = :4791' | wc -l; }

add_link h1 "$DEV1" v1
add_link h2 "$DEV2" v2
wait_port_active "$DEV1"
wait_port_active "$DEV2"

log "one IPv4 and one IPv6 receive socket per namespace"
assert_eq 2 "$(sockets h1)" "UDP 4791 sockets in h1"
assert_eq 2 "$(sockets h2)" "UDP 4791 sockets in h2"
out=$(rdma statistic show link "$DEV1/1")
assert_contains "$out" "rcvd_icrc_err" "rdma statistic"

# ------------------------------------------------------------ receive
log "receive: handcrafted packets from h2 to sroce1"
in_h2 python3 "$PKT" send 10.77.1.2 10.77.1.1 --len 32
expect_counter "$DEV1" rcvd_pkts 1
# Transport bytes: BTH 12 + DETH 8 + 32 payload + ICRC 4.
expect_counter "$DEV1" rcvd_bytes 56
in_h2 python3 "$PKT" send fd77:1::2 fd77:1::1 --len 5 --sport 50000
expect_counter "$DEV1" rcvd_pkts 2
# 12 + 8 + 5 + pad 3 + 4.
expect_counter "$DEV1" rcvd_bytes $((56 + 32))
assert_match "$(cat "$DBG/$DEV1/rx_opcodes")" '^0x64 2$' "rx_opcodes"

log "receive: bad ICRC and runts are dropped and counted"
in_h2 python3 "$PKT" send 10.77.1.2 10.77.1.1 --bad-icrc
in_h2 python3 "$PKT" send fd77:1::2 fd77:1::1 --bad-icrc
expect_counter "$DEV1" rcvd_icrc_err 2
in_h2 python3 "$PKT" send 10.77.1.2 10.77.1.1 --short
expect_counter "$DEV1" rcvd_drop_short 1
expect_counter "$DEV1" rcvd_pkts 2
assert_eq 0 "$(hw_counter "$DEV1" rcvd_drop_malformed)" "rcvd_drop_malformed"

# ------------------------------------------------------------ send
log "send: sroce1 -> h2, captured and checked in Python, accepted by sroce2"
bg_in h2 "$TEST_TMP/capture.log" python3 "$PKT" capture v2 3 --timeout 20
cap=$BG_PID
retry 10 grep -q listening "$TEST_TMP/capture.log" || fail "capture did not start"
echo "10.77.1.1 10.77.1.2 49152 100" >"$DBG/$DEV1/xmit"
echo "10.77.1.1 10.77.1.2 49153 7" >"$DBG/$DEV1/xmit"
echo "fd77:1::1 fd77:1::2 65535 0" >"$DBG/$DEV1/xmit"
rc=0
wait "$cap" || rc=$?
cat "$TEST_TMP/capture.log"
((rc == 0)) || fail "capture saw fewer than 3 good frames"
capture=$(cat "$TEST_TMP/capture.log")
assert_contains "$capture" "frame v4 10.77.1.1 10.77.1.2 sport=49152 len=100 icrc=ok payload=ok"
assert_contains "$capture" "frame v4 10.77.1.1 10.77.1.2 sport=49153 len=7 icrc=ok payload=ok"
assert_contains "$capture" "frame v6 fd77:1::1 fd77:1::2 sport=65535 len=0 icrc=ok payload=ok"
expect_counter "$DEV1" sent_pkts 3
# 12 + 8 + 100 + 4, 12 + 8 + 7 + 1 + 4, 12 + 8 + 4.
expect_counter "$DEV1" sent_bytes $((124 + 32 + 24))
expect_counter "$DEV2" rcvd_pkts 3
expect_counter "$DEV2" rcvd_icrc_err 0

log "send: errors are reported and counted"
# A source address the host does not have: no route.
assert_fails_with 'Network is unreachable' \
	bash -c "echo '10.77.9.9 10.77.1.2 49152 1' >$DBG/$DEV1/xmit"
assert_fails_with 'Invalid argument' bash -c "echo '10.77.1.1 fd77:1::2 1 1' >$DBG/$DEV1/xmit"
assert_fails_with 'Invalid argument' bash -c "echo 'bogus' >$DBG/$DEV1/xmit"
[[ $(hw_counter "$DEV1" send_no_route) -ge 1 ]] || fail "send_no_route did not move"
expect_counter "$DEV1" sent_pkts 3

# ------------------------------------------------------------ sockets
log "a second device in h1 shares its namespace's sockets"
second_path
add_link h1 "${DEV1}b" w1
assert_eq 2 "$(sockets h1)" "UDP 4791 sockets in h1 with two devices"
del_link "$DEV1"
assert_eq 2 "$(sockets h1)" "UDP 4791 sockets in h1 after deleting one device"
in_h2 python3 "$PKT" send 10.77.2.2 10.77.2.1 --len 1
expect_counter "${DEV1}b" rcvd_pkts 1
del_link "${DEV1}b"
assert_eq 0 "$(sockets h1)" "UDP 4791 sockets in h1 after deleting both"
assert_ok in_h1 python3 "$PKT" bind

log "port 4791 taken in a namespace: rdma link add fails with EADDRINUSE"
bg_in h1 "$TEST_TMP/hold.log" python3 "$PKT" hold
holder=$BG_PID
retry 10 grep -q holding "$TEST_TMP/hold.log" || fail "holder did not start"
assert_fails_with 'Address already in use' in_h1 rdma link add "$DEV1" type sroce netdev v1
kill "$holder"
wait "$holder" 2>/dev/null || true
add_link h1 "$DEV1" v1

if [[ -n $RXE_KO && -f $RXE_KO ]]; then
	log "rxe interop: rxe on v2 accepts what sroce1 sends"
	del_link "$DEV2"
	load_rxe
	on_exit unload_rxe
	in_h2 rdma link add rxe2 type rxe netdev v2 || fail "rdma link add rxe2"
	on_exit "rdma link delete rxe2"
	wait_port_active rxe2
	before=$(hw_counter rxe2 rcvd_pkts)
	echo "10.77.1.1 10.77.1.2 49154 64" >"$DBG/$DEV1/xmit"
	echo "fd77:1::1 fd77:1::2 49155 64" >"$DBG/$DEV1/xmit"
	expect_counter rxe2 rcvd_pkts $((before + 2))
	log "rxe holds port 4791 in h2: sroce cannot take it"
	assert_fails_with 'Address already in use' in_h2 rdma link add "$DEV2" type sroce netdev w2
	rdma link delete rxe2
else
	note "RXE_KO not set: rxe interop not checked"
fi

log "rmmod closes the sockets"
del_link "$DEV1"
add_link h1 "$DEV1" v1
assert_eq 2 "$(sockets h1)" "UDP 4791 sockets in h1"
unload_sroce
! module_loaded sroce || fail "sroce still loaded"
assert_ok in_h1 python3 "$PKT" bind

log "a namespace deleted under a device: sockets closed, no complaints"
load_sroce
ip netns add h3
ip link add x1 netns h3 type veth peer name x2 netns h2
in_ns h3 ip link set x1 up
in_ns h3 rdma link add sroce3 type sroce netdev x1 || fail "rdma link add sroce3"
assert_eq 2 "$(sockets h3)" "UDP 4791 sockets in h3"
ip netns del h3
retry 10 sh -c '! [ -e /sys/class/infiniband/sroce3 ]' || fail "sroce3 still exists"
unload_sroce
! module_loaded sroce || fail "sroce still loaded after the namespace went"
