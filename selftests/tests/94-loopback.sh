#!/bin/bash
# Loopback: QP to QP on ONE sroce device, and between two sroce devices of
# one network namespace, over every kind of RoCE v2 GID the device lists:
# the IPv6 link-local one (index 0, the default of many programs), a global
# IPv6 one and the IPv4 one. Packets to one of the host's own addresses go
# through the IP stack's loopback device (`lo`), so they come in on `lo`;
# RC replies (ACKs, READ responses, atomic responses) must still find their
# way back. Each case: ibv_rc_pingpong, ibv_ud_pingpong, and verbs_data
# (RC WRITE, READ, atomics, SEND, SRQ and the error completions).
# timeout: 480
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's loopback"
require_module_file
load_sroce
on_exit unload_sroce
two_hosts
# Two more net devices in h1, joined to each other: a device pair of one
# namespace (x1 10.77.3.1 fd77:3::1, x2 10.77.3.2 fd77:3::2).
in_h1 ip link add x1 type veth peer name x2
# IPv4 between two links of one host: the packets (and the ARP that the
# RDMA core's address resolution sends) leave x1 and arrive on x2 with a
# source address of this host, which IPv4 drops as martian unless
# accept_local is set (IPv6 has no such rule). Any stack needs this.
for k in all default; do
	in_h1 sysctl -qw "net.ipv4.conf.$k.accept_local=1" "net.ipv4.conf.$k.rp_filter=0"
done
for n in 1 2; do
	in_h1 ip addr add "10.77.3.$n/24" dev "x$n"
	in_h1 ip -6 addr add "fd77:3::$n/64" dev "x$n" nodad
	in_h1 sysctl -qw "net.ipv4.conf.x$n.accept_local=1" "net.ipv4.conf.x$n.rp_filter=0"
	in_h1 ip link set "x$n" up
done
add_link h1 lb1 v1
add_link h1 lb2 x1
add_link h1 lb3 x2
for d in lb1 lb2 lb3; do wait_port_active "$d"; done

# link_local_gid DEV: the index of DEV's RoCE v2 GID for its fe80:: address
# (added by the kernel a moment after the link is up).
link_local_gid() {
	local deadline=$((SECONDS + 20)) line
	while :; do
		line=$(gid_table "$1" | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
		[[ -n $line ]] && { echo "$line"; return 0; }
		((SECONDS < deadline)) || fail "no link-local RoCE v2 GID on $1: $(gid_table "$1" | tr '\n' ';')"
		sleep 0.2
	done
}

gid_table lb1 | sed 's/^/# lb1 GID /'
declare -A gid
gid[lb1,ll]=$(link_local_gid lb1)
gid[lb2,ll]=$(link_local_gid lb2)
gid[lb3,ll]=$(link_local_gid lb3)
gid[lb1,v6]=$(gid_index lb1 fd77:1::1)
gid[lb2,v6]=$(gid_index lb2 fd77:3::1)
gid[lb3,v6]=$(gid_index lb3 fd77:3::2)
gid[lb1,v4]=$(gid_index lb1 10.77.1.1)
gid[lb2,v4]=$(gid_index lb2 10.77.3.1)
gid[lb3,v4]=$(gid_index lb3 10.77.3.2)
((gid[lb1,ll] == 0)) || note "lb1's link-local GID is at index ${gid[lb1,ll]}, not 0"


# one_case SERVER_DEV CLIENT_DEV KIND: all three programs, server on the
# first device, client on the second (the same device for one-device
# loopback); the out-of-band TCP exchange goes over h1's lo.
one_case() {
	local sd=$1 cd=$2 kind=$3 sg cg what out rc=0
	sg=${gid[$sd,$kind]} cg=${gid[$cd,$kind]}
	what="$sd (GID $sg) <- $cd (GID $cg), $kind"
	run_pair h1 "ibv_rc_pingpong -d $sd -g $sg -n 5 -s 100000 -m 1024 -c" \
		h1 "ibv_rc_pingpong -d $cd -g $cg -n 5 -s 100000 -m 1024 -c 127.0.0.1"
	assert_match "$CLIENT_OUT" "5 iters in" "ibv_rc_pingpong $what"
	run_pair h1 "ibv_ud_pingpong -d $sd -g $sg -n 20 -s 512 -c" \
		h1 "ibv_ud_pingpong -d $cd -g $cg -n 20 -s 512 -c 127.0.0.1"
	assert_match "$CLIENT_OUT" "20 iters in" "ibv_ud_pingpong $what"
	out=$(in_h1 timeout 300 "$SROCE_BIN/verbs_data" "$cd" "$cg" "$sd" "$sg" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -v '^ok' || true
	((rc == 0)) || fail "verbs_data $what exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
	assert_contains "$out" "all checks passed" "verbs_data $what"
	log "ok: $what ($(grep -c '^ok' <<<"$out") verbs_data checks)"
}

before=$(cat "/sys/module/$MOD_NAME/refcnt")
lo_rx0=$(in_h1 cat /sys/class/net/lo/statistics/rx_packets)
for kind in ll v6 v4; do
	one_case lb1 lb1 "$kind"
	one_case lb2 lb3 "$kind"
done
lo_rx1=$(in_h1 cat /sys/class/net/lo/statistics/rx_packets)
log "h1 lo rx_packets: $lo_rx0 -> $lo_rx1; lb1 rcvd_pkts $(hw_counter lb1 rcvd_pkts)"
(($(hw_counter lb1 rcvd_pkts) > 0)) || fail "lb1 counted no received packets"
assert_eq "$before" "$(cat "/sys/module/$MOD_NAME/refcnt")" \
	"module reference count after the loopback cases"
del_link lb1
del_link lb2
del_link lb3
