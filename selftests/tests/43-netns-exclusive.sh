#!/bin/bash
# Devices in containers: with the RDMA subsystem in exclusive netns mode
# (`rdma system set netns exclusive`, what Kubernetes' RDMA device plugins
# use), `rdma dev set DEV netns NS` moves each device into its net device's
# namespace, where only it is seen (ibv_devices, rdma dev/link, sysfs) and
# it works: its GIDs, ibv_rc_pingpong (payload-checked) over IPv4 and IPv6
# GIDs, ibv_ud_pingpong, rdma_cm's rping, and its counters move. Deleting
# a namespace removes the device with its net device; the module unloads.
# The mode is restored to shared afterwards (the other tests need it).
# Runs for rxe too (SROCE_TESTS_TYPE=rxe), as the reference (whose rping
# fails there: a note).
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce

# The mode can only change while no namespace but the initial one exists;
# the previous test's are deleted asynchronously.
retry 30 rdma system set netns exclusive || fail "rdma system set netns exclusive: $(rdma system)"
on_exit 'retry 30 rdma system set netns shared'
assert_match "$(rdma system)" "netns exclusive" "exclusive mode"

two_hosts
add_link h1 "$DEV1" v1
add_link h2 "$DEV2" v2
wait_port_active "$DEV1"
wait_port_active "$DEV2"

# A new device belongs to the initial namespace (as rxe's do) until moved.
assert_contains "$(ib_devs)" "$DEV1" "$DEV1 in the initial namespace before the move"
rdma dev set "$DEV1" netns h1 || fail "rdma dev set $DEV1 netns h1"
rdma dev set "$DEV2" netns h2 || fail "rdma dev set $DEV2 netns h2"

# in_ns_devs NS: the devices NS sees in sysfs.
in_ns_devs() { in_ns "$1" ls /sys/class/infiniband/ 2>/dev/null | sort | tr '\n' ' '; }
devs=$(in_ns_devs -)
[[ " $devs " != *" $DEV1 "* && " $devs " != *" $DEV2 "* ]] ||
	fail "the initial namespace still sees the moved devices: $devs"
assert_eq "$DEV1 " "$(in_ns_devs h1)" "h1 sees its device only"
assert_eq "$DEV2 " "$(in_ns_devs h2)" "h2 sees its device only"
assert_match "$(in_h1 ibv_devices)" "$DEV1" "ibv_devices in h1"
if in_h1 ibv_devices | grep -qw "$DEV2"; then fail "h1's ibv_devices lists $DEV2"; fi
assert_match "$(in_h1 rdma link show)" "link $DEV1/1 state ACTIVE .*netdev v1" "rdma link in h1"
assert_match "$(in_h2 rdma dev show)" "$DEV2: node_type ca" "rdma dev in h2"

# ns_gid NS DEV ADDR: the index of DEV's RoCE v2 GID for ADDR, read in NS
# (the device's sysfs lives there now).
ns_gid() {
	local want
	want=$(gid_of_ip "$3")
	# shellcheck disable=SC2016 # expanded by the inner shell
	in_ns "$1" bash -c 'b=/sys/class/infiniband/$1/ports/1
		for i in 1 2 3 4 5 6 7 8 9 10; do
			for f in $(grep -lx -- "$2" "$b"/gids/* 2>/dev/null); do
				n=${f##*/}
				[[ $(cat "$b/gid_attrs/types/$n") == "RoCE v2" ]] && { echo "$n"; exit 0; }
			done
			sleep 1
		done
		exit 1' ns_gid "$2" "$want" || fail "no RoCE v2 GID for $3 on $2 in $1"
}
g1=$(ns_gid h1 "$DEV1" 10.77.1.1) g2=$(ns_gid h2 "$DEV2" 10.77.1.2)
g1v6=$(ns_gid h1 "$DEV1" fd77:1::1) g2v6=$(ns_gid h2 "$DEV2" fd77:1::2)
log "GIDs in the namespaces: $DEV1 $g1 (IPv4) $g1v6 (IPv6), $DEV2 $g2 $g2v6"

hw() { in_ns "$1" cat "/sys/class/infiniband/$2/ports/1/hw_counters/$3" 2>/dev/null || echo 0; }
sent0=$(hw h1 "$DEV1" sent_pkts)
for gids in "$g1 $g2" "$g1v6 $g2v6"; do
	read -r a b <<<"$gids"
	run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $a -n 20 -s 4096 -c" \
		h2 "ibv_rc_pingpong -d $DEV2 -g $b -n 20 -s 4096 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "20 iters in" "ibv_rc_pingpong -c in the namespaces (GIDs $a, $b)"
done
run_pair h1 "ibv_ud_pingpong -d $DEV1 -g $g1 -n 20 -s 512 -c" \
	h2 "ibv_ud_pingpong -d $DEV2 -g $g2 -n 20 -s 512 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "20 iters in" "ibv_ud_pingpong -c in the namespaces"
if [[ $LINK_TYPE == sroce ]]; then
	sent=$(($(hw h1 "$DEV1" sent_pkts) - sent0))
	log "$DEV1 sent_pkts +$sent (read in h1)"
	((sent >= 60)) || fail "$DEV1's sent_pkts moved by $sent only"
fi

# rdma_cm resolves addresses in the caller's namespace and finds the
# device there. (rxe 7.3: rping's rdma_connect fails with EINVAL here.)
rping_pair() {
	cm_run_pair h1 "rping -s -a 10.77.1.1 -v -V -C 10" h2 "rping -c -a 10.77.1.1 -v -V -C 10"
	assert_match "$CLIENT_OUT" "ping data" "rping between the namespaces"
}
if command -v rping >/dev/null; then
	sroce_only "rping between the namespaces" rping_pair
fi

# A namespace going away takes its net device, and with it the device.
ip netns del h1
ip netns del h2
retry 15 bash -c "! ls /sys/class/infiniband/ 2>/dev/null | grep -qw -e $DEV1 -e $DEV2" ||
	fail "devices left after their namespaces were deleted: $(ib_devs | tr '\n' ' ')"
retry 30 rdma system set netns shared || fail "back to shared mode: $(rdma system)"
assert_match "$(rdma system)" "netns shared" "shared mode restored"
unload_sroce
! module_loaded "$MOD_NAME" || fail "$MOD_NAME still loaded"
