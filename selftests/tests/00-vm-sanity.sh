#!/bin/bash
# The VM has what the other tests need: rdma-core tools, uverbs, the rxe
# module file, netns + veth, and h1 <-> h2 connectivity.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

for tool in ibv_devinfo ibv_devices ibv_rc_pingpong rdma ib_write_bw ib_send_lat rping ip ss timeout insmod rmmod modinfo dmesg; do
	command -v "$tool" >/dev/null || fail "tool '$tool' missing in the VM"
done
[[ -d /sys/class/infiniband_verbs ]] || fail "/sys/class/infiniband_verbs missing (CONFIG_INFINIBAND_USER_ACCESS)"
[[ -e /sys/class/infiniband_verbs/abi_version ]] || fail "no uverbs abi_version"
log "uverbs ABI $(cat /sys/class/infiniband_verbs/abi_version)"
[[ -w /dev/kmsg ]] || fail "/dev/kmsg not writable"

# The shared netns mode is what lib.sh's helpers assume.
assert_contains "$(rdma system show)" "netns shared" "rdma system show"

# rdma_rxe.ko (the reference provider) loads without dependencies.
[[ -f $RXE_KO ]] || fail "rdma_rxe.ko not found at '$RXE_KO'"
assert_eq "" "$(modinfo -F depends "$RXE_KO")" "rdma_rxe.ko dependencies"

two_hosts
assert_contains "$(in_h1 ip -br addr show v1)" "10.77.1.1/24"
assert_contains "$(in_h2 ip -br addr show v2)" "fd77:1::2/64"
retry 10 ping_ok h1 10.77.1.2 || fail "no IPv4 ping h1 -> h2"
retry 10 ping_ok h2 10.77.1.1 || fail "no IPv4 ping h2 -> h1"
retry 10 ping_ok h1 fd77:1::2 || fail "no IPv6 ping h1 -> h2"
second_path
retry 10 ping_ok h1 10.77.2.2 || fail "no IPv4 ping over the second path"
# The helpers' GID spelling.
assert_eq 0000:0000:0000:0000:0000:ffff:0a4d:0101 "$(gid_of_ip 10.77.1.1)" "gid_of_ip"
assert_eq fd77:0001:0000:0000:0000:0000:0000:0001 "$(gid_of_ip fd77:1::1)" "gid_of_ip v6"
assert_eq fe80:0000:0000:0000:0001:0002:0003:0004 "$(gid_of_ip fe80::1:2:3:4)" "gid_of_ip v6"
pinned=$(pinned_pages)
[[ $pinned =~ ^-?[0-9]+$ ]] || fail "pinned_pages gave '$pinned'"
log "pinned pages: $pinned"
