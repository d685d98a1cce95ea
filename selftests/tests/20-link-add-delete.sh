#!/bin/bash
# rdma link add/delete: the device appears where tools look and goes away.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts

add_link h1 "$DEV1" v1
out=$(in_h1 rdma link show "$DEV1/1")
log "$out"
assert_match "$out" "^link $DEV1/1 " "rdma link show (in h1)"
assert_contains "$out" "netdev v1" "rdma link show (in h1)"
# From another namespace the device is visible (shared mode), the netdev not.
assert_contains "$(rdma link show)" "link $DEV1/1" "rdma link show (init netns)"
assert_contains "$(rdma dev show "$DEV1")" "$DEV1" "rdma dev show"
assert_contains "$(ibv_devices)" "$DEV1" "ibv_devices"
[[ -e /sys/class/infiniband/$DEV1/ports/1 ]] || fail "no sysfs port 1"
compgen -G "/sys/class/infiniband_verbs/uverbs*" >/dev/null || fail "no uverbs device"

del_link "$DEV1"
[[ ! -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 still in sysfs after delete"
assert_not_contains "$(ibv_devices)" "$DEV1" "ibv_devices after delete"
assert_not_contains "$(rdma link show)" "$DEV1" "rdma link show after delete"

# Re-add works, and a second device on the other host coexists.
add_link h1 "$DEV1" v1
add_link h2 "$DEV2" v2
assert_contains "$(in_h2 rdma link show "$DEV2/1")" "netdev v2"
devs=$(ibv_devices)
assert_contains "$devs" "$DEV1" "ibv_devices"
assert_contains "$devs" "$DEV2" "ibv_devices"
wait_port_active "$DEV1"
wait_port_active "$DEV2"
del_link "$DEV1"
del_link "$DEV2"
assert_eq "" "$(ib_devs)" "devices after deleting both"

# Deleting the netdev removes the rdma device with it.
add_link h1 "$DEV1" v1
in_h1 ip link del v1
retry 10 test ! -e "/sys/class/infiniband/$DEV1" || fail "$DEV1 outlived its netdev"
