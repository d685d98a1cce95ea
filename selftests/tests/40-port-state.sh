#!/bin/bash
# The port follows its netdev: down, up, and the peer taking the carrier away.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"
assert_match "$(ibv_devinfo -d "$DEV1")" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "ibv_devinfo"
# The port's users hear of its changes (ibv_get_async_event).
bg_in - "$TEST_TMP/events.log" stdbuf -oL ibv_asyncwatch -d "$DEV1"
events=$BG_PID
# Events are queued for it only once it has the device open.
retry 10 grep -q "async event FD" "$TEST_TMP/events.log" || fail "ibv_asyncwatch did not start: $(cat "$TEST_TMP/events.log")"

in_h1 ip link set v1 down
wait_port_state "$DEV1" DOWN
retry 10 grep -q "IBV_EVENT_PORT_ERR (10), port 1" "$TEST_TMP/events.log" ||
	fail "no IBV_EVENT_PORT_ERR with v1 down: $(cat "$TEST_TMP/events.log")"
assert_match "$(ibv_devinfo -d "$DEV1")" 'state:[[:space:]]+PORT_DOWN \(1\)' "ibv_devinfo with v1 down"
assert_contains "$(in_h1 rdma link show "$DEV1/1")" "state DOWN" "rdma link show with v1 down"
grep -q DOWN "/sys/class/infiniband/$DEV1/ports/1/state" || fail "sysfs state not DOWN"

in_h1 ip link set v1 up
wait_port_active "$DEV1"
assert_match "$(ibv_devinfo -d "$DEV1")" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "ibv_devinfo with v1 up again"
retry 10 grep -q "IBV_EVENT_PORT_ACTIVE (9), port 1" "$TEST_TMP/events.log" ||
	fail "no IBV_EVENT_PORT_ACTIVE with v1 up: $(cat "$TEST_TMP/events.log")"
kill "$events" 2>/dev/null || true

# veth carrier needs both ends up: the peer going down takes v1's carrier.
in_h2 ip link set v2 down
wait_port_state "$DEV1" DOWN
in_h2 ip link set v2 up
wait_port_active "$DEV1"

# A few quick flaps end ACTIVE.
for _ in 1 2 3; do
	in_h1 ip link set v1 down
	in_h1 ip link set v1 up
done
wait_port_active "$DEV1"
