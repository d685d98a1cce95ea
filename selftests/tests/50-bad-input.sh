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

# Unload while a user context is open: an ibv_rc_pingpong server in h1
# holds DEV1 open while it waits for its client. sroce has no
# disassociate_ucontext, so uverbs holds a module reference and rmmod must
# fail. (rxe in 7.3 implements disassociate_ucontext: its rmmod succeeds
# and the open context is cut off; that path is checked too.)
bg_in h1 "$TEST_TMP/holder.log" ibv_rc_pingpong -d "$DEV1" -g "$g1" -n 10
holder=$BG_PID
wait_listen h1 "$OOB_PORT"
rmmod_refused() { assert_fails_with 'in use' rmmod "$MOD_NAME"; }
sroce_only "rmmod with a user context open must fail (module in use)" rmmod_refused
if ! module_loaded "$MOD_NAME"; then
	# rxe: the module went away under the open context. The device must be
	# gone, and the holder must still be killable.
	[[ ! -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 still there after rmmod"
	kill -0 "$holder" 2>/dev/null && note "$LINK_TYPE: the holder survived rmmod (disassociated)"
	kill -9 "$holder" 2>/dev/null || true
	wait "$holder" 2>/dev/null || true
	assert_eq "" "$(ib_devs)" "devices after rmmod"
	exit 0
fi
[[ -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 gone after the failed rmmod"
assert_match "$(ibv_devinfo -d "$DEV1")" 'PORT_ACTIVE' "ibv_devinfo after the failed rmmod"
# The device still works: finish the pingpong from h2.
in_h2 timeout 60 ibv_rc_pingpong -d "$DEV2" -g "$g2" -n 10 10.77.1.1 >"$TEST_TMP/client.log" 2>&1 ||
	fail "pingpong after the failed rmmod: $(cat "$TEST_TMP/client.log")"
wait "$holder" || fail "pingpong server failed: $(cat "$TEST_TMP/holder.log")"

# A holder that is killed instead of finishing: afterwards rmmod works.
bg_in h1 "$TEST_TMP/holder2.log" ibv_rc_pingpong -d "$DEV1" -g "$g1" -n 10
holder=$BG_PID
wait_listen h1 "$OOB_PORT"
assert_fails_with 'in use' rmmod "$MOD_NAME"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
retry 10 rmmod "$MOD_NAME" || fail "rmmod after killing the holder: $(rmmod "$MOD_NAME" 2>&1)"
! module_loaded "$MOD_NAME" || fail "module still loaded"
assert_eq "" "$(ib_devs)" "devices after rmmod"
