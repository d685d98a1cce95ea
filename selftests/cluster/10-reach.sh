#!/bin/bash
# Every node of the cluster is its own host with its own sroce device, and
# every pair of them talks RDMA across the segment: sroce loaded with
# modprobe from the installed modules (on a kernel with the RDMA core and
# UDP tunnels as modules, depmod's dependencies bring those in), bound to
# the node's NIC; RC ping-pongs with payload checks around the ring of
# nodes over the IPv4 GID (each node once server, once client), between
# nodes 0 and 1 over the global IPv6 GID and between nodes 1 and 2 over
# GID 0 (the IPv6 link-local GID tools pick first); UD ping-pong node 0 ->
# 2; rping node 1 -> 2 over rdma_cm, which moves its data with RDMA READ
# and WRITE and verifies it; the packet counters of every node move.
# timeout: 400
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"
need_nodes 3

for ((n = 0; n < NODES; n++)); do
	for ((m = 0; m < NODES; m++)); do
		((m == n)) && continue
		# (The first ping also resolves the neighbour: a few tries.)
		retry 10 on "$n" "ping_ok - $(ip_of "$m")" || fail "node $n cannot reach node $m"
	done
done
log "the $NODES nodes reach each other on $NETDEV"

for ((n = 0; n < NODES; n++)); do
	sroce_on "$n"
	on "$n" "ibv_devinfo -d sroce0 | grep -q PORT_ACTIVE" || fail "ibv_devinfo on node $n: sroce0 not active"
	assert_match "$(on "$n" "lsmod")" '^sroce ' "node $n's loaded modules"
done
log "sroce0 ACTIVE on every node"
if grep -qx 'CONFIG_INFINIBAND=m' "$SROCE_KDIR/.config"; then
	deps=$(modinfo -b "$MODROOT" -k "$(uname -r)" -F depends sroce)
	log "a kernel with the RDMA core as modules; sroce depends on: $deps"
	for m in ib_core udp_tunnel ip6_udp_tunnel; do
		[[ ,$deps, == *,$m,* ]] || fail "depmod does not list $m among sroce's dependencies ($deps)"
		for ((n = 0; n < NODES; n++)); do
			assert_match "$(on "$n" "lsmod")" "^$m " "node $n: $m loaded by modprobe sroce"
		done
	done
else
	log "a kernel with the RDMA core built in"
fi

sent0=() rcvd0=()
for ((n = 0; n < NODES; n++)); do
	sent0[n]=$(counter_on "$n" sroce0 sent_pkts)
	rcvd0[n]=$(counter_on "$n" sroce0 rcvd_pkts)
done

# The ring: node n+1 serves, node n connects.
for ((n = 0; n < NODES; n++)); do
	s=$(((n + 1) % NODES))
	gs=$(gid_on "$s" sroce0) gc=$(gid_on "$n" sroce0)
	pair_on "$s" "ibv_rc_pingpong -d sroce0 -g $gs -n 200 -s 4096 -c" \
		"$n" "ibv_rc_pingpong -d sroce0 -g $gc -n 200 -s 4096 -c $(ip_of "$s")"
	assert_match "$CLIENT_OUT" "200 iters in" "RC ping-pong node $n -> node $s (IPv4 GID)"
done
log "RC ping-pong around the ring over IPv4 GIDs"

gs=$(gid_on 1 sroce0 "$(ip6_of 1)") gc=$(gid_on 0 sroce0 "$(ip6_of 0)")
pair_on 1 "ibv_rc_pingpong -d sroce0 -g $gs -n 100 -s 1024 -c" \
	0 "ibv_rc_pingpong -d sroce0 -g $gc -n 100 -s 1024 -c $(ip_of 1)"
assert_match "$CLIENT_OUT" "100 iters in" "RC ping-pong over the IPv6 GID"

# GID 0: the link-local address, as RoCE v2 (fe80::/64 from the MAC).
for n in 1 2; do
	t=$(on "$n" "cat /sys/class/infiniband/sroce0/ports/1/gid_attrs/types/0")
	g=$(on "$n" "cat /sys/class/infiniband/sroce0/ports/1/gids/0")
	[[ $g == fe80:* ]] || fail "node $n: GID 0 is $g ($t), not the link-local address"
done
pair_on 2 "ibv_rc_pingpong -d sroce0 -g 0 -n 100 -s 2048 -c" \
	1 "ibv_rc_pingpong -d sroce0 -g 0 -n 100 -s 2048 -c $(ip_of 2)"
assert_match "$CLIENT_OUT" "100 iters in" "RC ping-pong over GID 0 (link-local)"
log "RC ping-pong over the IPv6 global and link-local GIDs"

# UD has no retransmission and ibv_ud_pingpong waits forever for a lost
# datagram: on a segment that may drop frames, up to three tries.
gs=$(gid_on 2 sroce0) gc=$(gid_on 0 sroce0)
for try in 1 2 3; do
	# (The subshell runs no EXIT trap: it kills its own background server.)
	(_BG_PIDS=() && trap _kill_bg EXIT && pair_on 2 "ibv_ud_pingpong -d sroce0 -g $gs -n 200 -s 1024 -c" \
		0 "timeout $((40 * SCALE)) ibv_ud_pingpong -d sroce0 -g $gc -n 200 -s 1024 -c $(ip_of 2)" &&
		assert_match "$CLIENT_OUT" "200 iters in" "UD ping-pong node 0 -> node 2") && break
	((try < 3)) || fail "UD ping-pong node 0 -> node 2 failed three times"
	note "UD ping-pong try $try failed (a lost datagram?), trying again"
done

# rping: rdma_cm connection; the server RDMA READs the client's buffer and
# RDMA WRITEs it back, the client verifies every round (-V).
on_bg 2 "$TEST_TMP/rping-server.log" "rping -s -a $(ip_of 2) -p 7174 -C 50 -S 8192 -V"
srv=$BG_PID
retry 20 on 2 "rdma resource show cm_id | grep -q LISTEN" || fail "rping server on node 2 does not listen"
out=$(on 1 "timeout $((120 * SCALE)) rping -c -a $(ip_of 2) -p 7174 -C 50 -S 8192 -V -v" 2>&1) ||
	fail "rping client on node 1 failed: $(tail -n 3 <<<"$out")"
wait "$srv" || fail "rping server on node 2 failed: $(tail -n 3 "$TEST_TMP/rping-server.log")"
assert_eq 50 "$(grep -c 'ping data' <<<"$out")" "rping rounds verified by the client"
log "rping node 1 -> node 2: 50 verified rounds of 8 KiB"

for ((n = 0; n < NODES; n++)); do
	s=$(counter_on "$n" sroce0 sent_pkts) r=$(counter_on "$n" sroce0 rcvd_pkts)
	log "node $n: sent_pkts +$((s - sent0[n])), rcvd_pkts +$((r - rcvd0[n]))"
	((s - sent0[n] >= 400 && r - rcvd0[n] >= 400)) || fail "node $n's packet counters hardly moved"
done
