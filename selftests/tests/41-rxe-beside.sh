#!/bin/bash
# rdma_rxe loaded beside sroce. sroce presents rxe's driver id (rdma-core
# picks its userspace library by it), and rxe finds "its" device for a net
# device by that id: if sroce's devices were in the RDMA core's table by
# net device, rxe's netdev notifier would treat sroce's device as an rxe_dev
# on every MTU change, link change and removal of sroce's net device (KASAN:
# slab-out-of-bounds write in rxe_notify). Here each event happens on
# sroce's net device with rxe loaded and an rxe device next door; sroce's
# port follows, its port events arrive, rxe and sroce still talk, and the
# kernel log stays clean (vm-main checks it; a KASAN kernel makes a stray
# write loud).
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce beside rxe"
require_module_file
[[ -f $RXE_KO ]] || skip "no rdma_rxe.ko"
load_sroce
on_exit unload_sroce
load_rxe
on_exit unload_rxe
two_hosts
add_link h1 sroce1 v1 sroce
add_link h2 rxe2 v2 rxe
on_exit del_all_links
wait_port_active sroce1
wait_port_active rxe2

bg_in - "$TEST_TMP/events.log" stdbuf -oL ibv_asyncwatch -d sroce1
# Events are queued for it only once it has the device open.
retry 10 grep -q "async event FD" "$TEST_TMP/events.log" || fail "ibv_asyncwatch did not start: $(cat "$TEST_TMP/events.log")"

mtu_is() { ibv_devinfo -d sroce1 | grep -Eq "active_mtu:[[:space:]]+$1"; }
log "MTU changes on v1 reach sroce1's port only"
in_h1 ip link set v1 mtu 9000
retry 10 mtu_is "4096 \(5\)" || fail "sroce1 active_mtu not 4096 at MTU 9000"
in_h1 ip link set v1 mtu 1500
retry 10 mtu_is "1024 \(3\)" || fail "sroce1 active_mtu not 1024 at MTU 1500"

log "v1 down and up: sroce1's port events"
in_h1 ip link set v1 down
wait_port_state sroce1 DOWN
retry 10 grep -q IBV_EVENT_PORT_ERR "$TEST_TMP/events.log" ||
	fail "no IBV_EVENT_PORT_ERR on sroce1: $(cat "$TEST_TMP/events.log")"
in_h1 ip link set v1 up
wait_port_active sroce1
retry 10 grep -q IBV_EVENT_PORT_ACTIVE "$TEST_TMP/events.log" ||
	fail "no IBV_EVENT_PORT_ACTIVE on sroce1: $(cat "$TEST_TMP/events.log")"
wait_port_active rxe2

log "rxe and sroce still talk"
g1=$(gid_index sroce1 10.77.1.1)
g2=$(gid_index rxe2 10.77.1.2)
run_pair h2 "ibv_rc_pingpong -d rxe2 -g $g2 -n 20 -s 4096 -c" \
	h1 "ibv_rc_pingpong -d sroce1 -g $g1 -n 20 -s 4096 -c 10.77.1.2"
assert_match "$CLIENT_OUT" "20 iters in" "rc_pingpong sroce1 -> rxe2 after the events"

log "rxe cannot take v1 from sroce1"
assert_fails_with "" in_h1 rdma link add rxe1 type rxe netdev v1

log "v1 goes away: sroce1 with it, rxe2 with v2"
kill -9 "$BG_PID" 2>/dev/null || true
in_h1 ip link del v1
retry 15 test ! -e /sys/class/infiniband/sroce1 || fail "sroce1 still exists after v1 was deleted"
retry 15 test ! -e /sys/class/infiniband/rxe2 || fail "rxe2 still exists after v2 was deleted"
log "sroce unloads cleanly with rxe loaded"
unload_sroce
module_loaded "$MOD_NAME" && fail "sroce did not unload"
true
