#!/bin/bash
# ibv_devinfo sees a RoCE device that follows its netdev: transport, link
# layer, port state, MTU, node GUID from the MAC, and the GID table.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"

# field NAME TEXT: the value after "NAME:" in ibv_devinfo output.
field() { sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" <<<"$2" | head -n1; }

# Wait for the IPv4 GID so the table below is complete.
g4=$(gid_index "$DEV1" 10.77.1.1)
g6=$(gid_index "$DEV1" fd77:1::1)
info=$(ibv_devinfo -d "$DEV1" -v)
printf '%s\n' "$info" | sed 's/^/#   /'

assert_match "$info" 'transport:[[:space:]]+InfiniBand \(0\)' "transport"
assert_match "$info" 'link_layer:[[:space:]]+Ethernet' "link_layer"
assert_match "$info" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "port state"
assert_match "$info" 'active_mtu:[[:space:]]+1024 \(3\)' "active_mtu at netdev MTU 1500"
assert_match "$info" 'max_mtu:[[:space:]]+4096 \(5\)' "max_mtu"
assert_match "$info" 'phys_state:[[:space:]]+LINK_UP \(5\)' "phys_state"

# Capabilities: non-zero.
for f in max_qp max_cqe max_mr_size max_sge max_cq max_mr max_pd max_qp_wr; do
	v=$(field "$f" "$info")
	[[ -n $v ]] || fail "ibv_devinfo has no $f"
	[[ $v != 0 && $v != 0x0 ]] || fail "$f is $v"
done

# Node GUID: EUI-64 from v1's MAC (flip the U/L bit, ff:fe in the middle),
# printed by ibv_devinfo as xxxx:xxxx:xxxx:xxxx.
mac=$(in_h1 cat /sys/class/net/v1/address)
IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
want=$(printf '%02x%s:%sff:fe%s:%s%s' "$((16#$m0 ^ 2))" "$m1" "$m2" "$m3" "$m4" "$m5")
assert_eq "$want" "$(field node_guid "$info")" "node_guid for MAC $mac"
assert_eq "$want" "$(cat "/sys/class/infiniband/$DEV1/node_guid")" "sysfs node_guid"

# GID table: IPv4-mapped 10.77.1.1 and fd77:1::1 as RoCE v2 entries.
# rdma-core prints IPv4-mapped GIDs as ::ffff:a.b.c.d; accept the long form.
assert_match "$info" "GID\[ *$g4\]:[[:space:]]+(::ffff:10\.77\.1\.1|0000:0000:0000:0000:0000:ffff:0a4d:0101), RoCE v2" "GID[$g4]"
assert_match "$info" "GID\[ *$g6\]:[[:space:]]+(fd77:1::1|fd77:0001:0000:0000:0000:0000:0000:0001), RoCE v2" "GID[$g6]"
# ...and the link-local default GID from the MAC at index 0.
g0=$(cat "/sys/class/infiniband/$DEV1/ports/1/gids/0")
assert_eq "fe80:0000:0000:0000:${want}" "$g0" "GID 0 (link-local from MAC)"
gid_table "$DEV1" | sed 's/^/# gid /'

# MTU follows the netdev.
in_h1 ip link set v1 mtu 9000
retry 10 bash -c "ibv_devinfo -d $DEV1 | grep -Eq 'active_mtu:[[:space:]]+4096 \(5\)'" ||
	fail "active_mtu not 4096 (5) at netdev MTU 9000: $(ibv_devinfo -d "$DEV1" | grep mtu)"
in_h1 ip link set v1 mtu 2000
retry 10 bash -c "ibv_devinfo -d $DEV1 | grep -Eq 'active_mtu:[[:space:]]+1024 \(3\)'" ||
	fail "active_mtu not 1024 (3) at netdev MTU 2000: $(ibv_devinfo -d "$DEV1" | grep mtu)"
in_h1 ip link set v1 mtu 4200
retry 10 bash -c "ibv_devinfo -d $DEV1 | grep -Eq 'active_mtu:[[:space:]]+4096 \(5\)'" ||
	fail "active_mtu not 4096 (5) at netdev MTU 4200: $(ibv_devinfo -d "$DEV1" | grep mtu)"
in_h1 ip link set v1 mtu 1500
retry 10 bash -c "ibv_devinfo -d $DEV1 | grep -Eq 'active_mtu:[[:space:]]+1024 \(3\)'" ||
	fail "active_mtu not back to 1024 (3) at netdev MTU 1500"

# A new address shows up in the GID table, and goes away with the address.
in_h1 ip addr add 10.77.3.1/24 dev v1
g3=$(gid_index "$DEV1" 10.77.3.1) || fail "no GID for an address added later"
log "GID for 10.77.3.1: $g3"
in_h1 ip addr del 10.77.3.1/24 dev v1
deadline=$((SECONDS + 10))
while gid_index "$DEV1" 10.77.3.1 "RoCE v2" 0 >/dev/null 2>&1; do
	((SECONDS < deadline)) || fail "GID for 10.77.3.1 stayed after the address was removed"
	sleep 0.2
done
