#!/bin/bash
# Module load/unload: the link type appears and disappears with the module,
# repeated loads work, and unloading removes devices still linked.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
two_hosts
unload_sroce

# Without the module, the core knows no such link type: EINVAL, after its
# request_module("rdma-link-TYPE") found nothing. (The VM's modprobe sees
# the kernel tree's modules, so rdma_rxe does get autoloaded; sroce.ko lives
# outside the tree and cannot be.)
no_type() {
	assert_fails_with 'Invalid argument' in_h1 rdma link add "$DEV1" type "$LINK_TYPE" netdev v1
	assert_eq "" "$(ib_devs)" "devices after the failed link add"
}
sroce_only "link add of a type whose module is not loaded must fail (EINVAL)" no_type
if module_loaded "$MOD_NAME"; then
	note "$MOD_NAME was autoloaded by 'rdma link add ... type $LINK_TYPE'"
	del_all_links
	unload_sroce
fi

for i in 1 2 3; do
	load_sroce
	module_loaded "$MOD_NAME" || fail "load $i: /sys/module/$MOD_NAME missing after insmod"
	assert_ok rmmod "$MOD_NAME"
	! module_loaded "$MOD_NAME" || fail "load $i: module still loaded after rmmod"
done

# Loaded: the link type works. Then rmmod with the device still linked.
load_sroce
add_link h1 "$DEV1" v1
[[ -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 not in /sys/class/infiniband"
assert_ok rmmod "$MOD_NAME"
! module_loaded "$MOD_NAME" || fail "module still loaded"
[[ ! -e /sys/class/infiniband/$DEV1 ]] || fail "$DEV1 still in /sys/class/infiniband after rmmod"
assert_eq "" "$(ib_devs)" "devices after rmmod"
assert_not_contains "$(rdma link show 2>&1)" "$DEV1" "rdma link show after rmmod"

# And it loads again after that, with a fresh device.
load_sroce
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"
del_link "$DEV1"
unload_sroce
