#!/bin/bash
# Module load/unload: the link type appears and disappears with the module,
# an installed module (make install) is loaded by `rdma link add`, repeated
# loads work, and unloading removes devices still linked.
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

# Installed by `make install` (run.sh stages it with the kernel's
# modules_install and depmod): the core's request_module("rdma-link-sroce")
# finds it through the alias depmod indexed. The kernel's modprobe helper
# points at the staging root meanwhile.
installed_autoload() {
	local root=$SROCE_RESULTS/modroot helper=$SROCE_RESULTS/modprobe-staged old
	if [[ ! -f $root/lib/modules/$(uname -r)/modules.alias ]]; then
		note "no staged 'make install' (SROCE_KO is not the tree's module): autoload not tested"
		return 0
	fi
	assert_match "$(cat "$root/lib/modules/$(uname -r)/modules.alias")" "alias rdma-link-sroce sroce" \
		"depmod indexed the rdma link alias"
	printf '#!/bin/sh\nexec /sbin/modprobe -d %s "$@"\n' "$root" >"$helper"
	chmod +x "$helper"
	old=$(cat /proc/sys/kernel/modprobe)
	on_exit "echo $old >/proc/sys/kernel/modprobe"
	echo "$helper" >/proc/sys/kernel/modprobe
	add_link h1 "$DEV1" v1
	echo "$old" >/proc/sys/kernel/modprobe
	module_loaded "$MOD_NAME" || fail "rdma link add did not load the installed $MOD_NAME"
	log "rdma link add loaded $(modinfo -F filename -b "$root" "$MOD_NAME")"
	wait_port_active "$DEV1"
	del_link "$DEV1"
	unload_sroce
}
if [[ $LINK_TYPE == sroce ]]; then installed_autoload; fi

# sroce's pass threads (lib.sh pass_threads): one per online CPU, at
# SCHED_FIFO priority 1 (stat fields 40 and 41); all gone after rmmod.
check_pass_threads() {
	local n=0 d fields
	for d in $(pass_threads); do
		# Fields from the third on, after the command's closing parenthesis.
		read -r -a fields < <(sed 's/.*) //' "$d/stat")
		assert_eq "1 1" "${fields[37]} ${fields[38]}" "$(cat "$d/comm"): rt_priority, policy (SCHED_FIFO)"
		n=$((n + 1))
	done
	assert_eq "$(getconf _NPROCESSORS_ONLN)" "$n" "pass threads"
}

for i in 1 2 3; do
	load_sroce
	module_loaded "$MOD_NAME" || fail "load $i: /sys/module/$MOD_NAME missing after insmod"
	if [[ $LINK_TYPE == sroce ]]; then check_pass_threads; fi
	assert_ok rmmod "$MOD_NAME"
	! module_loaded "$MOD_NAME" || fail "load $i: module still loaded after rmmod"
	assert_eq "" "$(pass_threads)" "load $i: pass threads after rmmod"
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
