#!/bin/bash
# Bad `rdma link add` requests fail with a clear error and leave nothing
# behind; removing the device or the module while it is open does not wait
# for the processes using it.
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

# Removing the device, or the module, while processes have it open: like
# rxe, sroce implements disassociate_ucontext, so neither waits for the
# processes. Their verbs objects are destroyed, later calls fail with EIO,
# and nothing is left behind.

# relink: the module loaded and both devices back, for what follows.
relink() {
	module_loaded "$MOD_NAME" || load_sroce
	[[ -e /sys/class/infiniband/$DEV1 ]] || add_link h1 "$DEV1" v1
	[[ -e /sys/class/infiniband/$DEV2 ]] || add_link h2 "$DEV2" v2
	wait_port_active "$DEV1"
	wait_port_active "$DEV2"
}

# hold_context: ctx_hold opens DEV1 through the rxe provider library
# (alloc_ucontext), queries it, and holds the context; sets HOLDER.
hold_context() {
	rm -f "$TEST_TMP/ready"
	bg_in h1 "$TEST_TMP/holder.log" "$SROCE_BIN/ctx_hold" "$DEV1" "$TEST_TMP/ready"
	HOLDER=$BG_PID
	retry 20 test -e "$TEST_TMP/ready" || fail "ctx_hold could not open $DEV1: $(cat "$TEST_TMP/holder.log")"
}

# cut_off_holder: the holder is still alive, its next query fails with EIO
# (5), and it can be killed.
cut_off_holder() {
	kill -0 "$HOLDER" || fail "the context holder died: $(cat "$TEST_TMP/holder.log")"
	kill -USR1 "$HOLDER"
	retry 20 grep -q '^requery:' "$TEST_TMP/holder.log" || fail "the holder did not re-query"
	sroce_only "a process's device that went away answers EIO" \
		assert_contains "$(cat "$TEST_TMP/holder.log")" "requery: 5" "ctx_hold after removal"
	kill -9 "$HOLDER"
	wait "$HOLDER" 2>/dev/null || true
}

# (a) rdma link delete with a user context open returns promptly.
hold_context
timeout 30 rdma link delete "$DEV1" || fail "rdma link delete with a context open did not complete"
[[ ! -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 still there after link delete"
cut_off_holder
relink

# (b) rmmod with a bare open of the uverbs char device (no verbs at all).
uv=$(uverbs_dev "$DEV1")
rm -f "$TEST_TMP/open"
bg_in h1 "$TEST_TMP/opener.log" bash -c "exec 3<>/dev/infiniband/$uv && touch '$TEST_TMP/open' && exec sleep 300"
opener=$BG_PID
retry 10 test -e "$TEST_TMP/open" || fail "could not open /dev/infiniband/$uv: $(cat "$TEST_TMP/opener.log")"
timeout 60 rmmod "$MOD_NAME" || fail "rmmod with /dev/infiniband/$uv open failed"
! module_loaded "$MOD_NAME" || fail "module still loaded"
assert_eq "" "$(ib_devs)" "devices after rmmod"
kill -9 "$opener"
wait "$opener" 2>/dev/null || true
relink

# (c) rmmod with a user context open: both devices go, the holder is cut off.
hold_context
timeout 60 rmmod "$MOD_NAME" || fail "rmmod with a user context open failed"
! module_loaded "$MOD_NAME" || fail "module still loaded"
assert_eq "" "$(ib_devs)" "devices after rmmod"
cut_off_holder
