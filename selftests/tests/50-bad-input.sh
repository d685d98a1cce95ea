#!/bin/bash
# Bad `rdma link add` requests fail with a clear error and leave nothing
# behind; the module cannot be unloaded while a user context is open.
# timeout: 150
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts

# expect_unchanged BEFORE WHAT: the device list is still BEFORE.
expect_unchanged() {
	assert_eq "$1" "$(ib_devs)" "devices in /sys/class/infiniband after $2"
}

# Unknown netdev: the core answers ENODEV before asking the provider.
assert_fails_with 'No such device' in_h1 rdma link add "$DEV1" type "$LINK_TYPE" netdev nosuch
expect_unchanged "" "netdev nosuch"

# A name with '%' or an empty name: EINVAL from the core.
assert_fails_with 'Invalid argument' in_h1 rdma link add "${LINK_TYPE}%d" type "$LINK_TYPE" netdev v1
expect_unchanged "" "a name with %"

add_link h1 "$DEV1" v1
base=$(ib_devs)

# The netdev already has a device of this type: EEXIST.
assert_fails_with 'File exists' in_h1 rdma link add "${LINK_TYPE}x" type "$LINK_TYPE" netdev v1
expect_unchanged "$base" "a second device on v1"

# Duplicate device name (on another netdev): the core's name check says
# ENFILE ("Too many open files in system"); EEXIST would be as clear.
assert_fails_with 'Too many open files|File exists' in_h2 rdma link add "$DEV1" type "$LINK_TYPE" netdev v2
expect_unchanged "$base" "a duplicate name"
# v2 is still free for a device after that.
add_link h2 "$DEV2" v2
del_link "$DEV2"
expect_unchanged "$base" "adding and deleting $DEV2"

# linkdel_if_made NAME: an accepted bad request (rxe) must not leak into the
# next check.
linkdel_if_made() {
	[[ -e /sys/class/infiniband/$1 ]] && rdma link delete "$1"
	return 0
}

# Loopback is not an Ethernet port a RoCE device can use.
check_lo() {
	assert_fails_with '' in_h1 rdma link add "${LINK_TYPE}lo" type "$LINK_TYPE" netdev lo
	expect_unchanged "$base" "netdev lo"
}
sroce_only "link add on netdev lo must fail" check_lo
linkdel_if_made "${LINK_TYPE}lo"

# A non-Ethernet netdev (tun: ARPHRD_NONE).
in_h1 ip tuntap add dev tun0 mode tun
in_h1 ip link set tun0 up
check_tun() {
	assert_fails_with '' in_h1 rdma link add "${LINK_TYPE}tun" type "$LINK_TYPE" netdev tun0
	expect_unchanged "$base" "netdev tun0"
}
sroce_only "link add on a tun (ARPHRD_NONE) netdev must fail" check_tun
linkdel_if_made "${LINK_TYPE}tun"
in_h1 ip link del tun0

# After all that, link add still works.
add_link h2 "$DEV2" v2
wait_port_active "$DEV1"
wait_port_active "$DEV2"
g1=$(gid_index "$DEV1" 10.77.1.1)
g2=$(gid_index "$DEV2" 10.77.1.2)

# Unload while the device is open. sroce has no disassociate_ucontext, so
# an open uverbs file holds a module reference and rmmod must fail ("in
# use"). rxe in 7.3 implements disassociate_ucontext: its rmmod succeeds
# and open files are cut off; that path is checked too.
rmmod_refused() { assert_fails_with 'in use' rmmod "$MOD_NAME"; }

# after_rmmod_went_through HOLDER: the rxe way. The device is gone and the
# holder can still be killed; then reload and re-add for what follows.
after_rmmod_went_through() {
	[[ ! -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 still there after rmmod"
	kill -0 "$1" 2>/dev/null && note "$LINK_TYPE: the holder survived rmmod (disassociated)"
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	assert_eq "" "$(ib_devs)" "devices after rmmod"
	load_sroce
	add_link h1 "$DEV1" v1
	add_link h2 "$DEV2" v2
	wait_port_active "$DEV1"
	wait_port_active "$DEV2"
	g1=$(gid_index "$DEV1" 10.77.1.1)
	g2=$(gid_index "$DEV2" 10.77.1.2)
}

# (a) A bare open of DEV1's uverbs char device, no verbs at all.
uv=$(uverbs_dev "$DEV1")
bg_in h1 "$TEST_TMP/opener.log" bash -c "exec 3<>/dev/infiniband/$uv && touch '$TEST_TMP/open' && exec sleep 300"
holder=$BG_PID
retry 10 test -e "$TEST_TMP/open" || fail "could not open /dev/infiniband/$uv: $(cat "$TEST_TMP/opener.log")"
sroce_only "rmmod with /dev/infiniband/$uv open must fail (module in use)" rmmod_refused
if module_loaded "$MOD_NAME"; then
	[[ -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 gone after the failed rmmod"
	kill -9 "$holder"
	wait "$holder" 2>/dev/null || true
else
	after_rmmod_went_through "$holder"
fi

# (b) A user context: ctx_hold opens DEV1 through the rxe provider library
# (alloc_ucontext), queries it, and holds the context.
bg_in h1 "$TEST_TMP/holder.log" "$SROCE_BIN/ctx_hold" "$DEV1" "$TEST_TMP/ready"
holder=$BG_PID
retry 20 test -e "$TEST_TMP/ready" || fail "ctx_hold could not open $DEV1: $(cat "$TEST_TMP/holder.log")"
sroce_only "rmmod with a user context open must fail (module in use)" rmmod_refused
if ! module_loaded "$MOD_NAME"; then
	after_rmmod_went_through "$holder"
	exit 0
fi
[[ -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 gone after the failed rmmod"
assert_match "$(ibv_devinfo -d "$DEV1")" 'PORT_ACTIVE' "ibv_devinfo after the failed rmmod"
kill -0 "$holder" || fail "the context holder died: $(cat "$TEST_TMP/holder.log")"

# (c) Once the holder is gone, rmmod works and removes both devices.
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
retry 10 rmmod "$MOD_NAME" || fail "rmmod after killing the holder: $(rmmod "$MOD_NAME" 2>&1)"
! module_loaded "$MOD_NAME" || fail "module still loaded"
assert_eq "" "$(ib_devs)" "devices after rmmod"
