#!/bin/bash
# The README's demo, run inside the VM by `run.sh --demo`: two "hosts" (network
# namespaces h1 and h2 joined by a veth pair), an sroce device on each, and
# what rdma-core's tools see of them.
set -euo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

echo "sroce demo: $(uname -r), $(nproc) CPUs"
show() { printf '\n$ %s\n' "$*"; "$@"; }

require_module_file
load_sroce
two_hosts
show ip netns exec h1 rdma link add sroce1 type sroce netdev v1
show ip netns exec h2 rdma link add sroce2 type sroce netdev v2
wait_port_active sroce1
wait_port_active sroce2
show ibv_devices
show ip netns exec h1 rdma link show
show ip netns exec h2 rdma link show
show ibv_devinfo -d sroce1
printf '\n$ ibv_devinfo -v -d sroce1 | grep GID\n'
ibv_devinfo -v -d sroce1 | grep GID
g1=$(gid_index sroce1 10.77.1.1)
g2=$(gid_index sroce2 10.77.1.2)
printf '\n$ ibv_rc_pingpong between the hosts (server on sroce1 in h1, client on sroce2 in h2)\n'
run_pair h1 "ibv_rc_pingpong -d sroce1 -g $g1 -n 10 -s 4096 -c" \
	h2 "ibv_rc_pingpong -d sroce2 -g $g2 -n 10 -s 4096 -c 10.77.1.1"
show cat /sys/class/infiniband/sroce1/ports/1/hw_counters/sent_pkts /sys/class/infiniband/sroce1/ports/1/hw_counters/rcvd_pkts

show ip -n h1 link set v1 down
show ip netns exec h1 rdma link show sroce1/1
show ip -n h1 link set v1 up
wait_port_active sroce1
show ip netns exec h1 rdma link show sroce1/1
show rdma link delete sroce2
show rmmod sroce
show ibv_devices

# Sessions: the two hosts again, now joined by two links and a multipath
# route between service addresses; one RC QP with a two-session group.
printf '\n# sessions: two links between the hosts (v1-v2, w1-w2), a multipath route\n'
_del_hosts
load_sroce
multipath_hosts
show ip -n h2 route show 10.77.9.1
link_devices 10.77.9.1 10.77.9.2
SROCE=$SROCE_BIN/sroce
show "$SROCE" dev set sroce1 group-size 2 policy round-robin reorder-guard off
show "$SROCE" dev set sroce2 group-size 2 policy round-robin reorder-guard off
show "$SROCE" dev show
g1=$G1 g2=$G2
bg_in h1 "$TEST_TMP/s.log" ib_write_bw -d sroce1 -x "$g1" -D 8 -s 65536 -F
wait_listen h1 "$OOB_PORT"
bg_in h2 "$TEST_TMP/c.log" ib_write_bw -d sroce2 -x "$g2" -D 8 -s 65536 -F 10.77.9.1
sleep 4
show "$SROCE" session show sroce2
show ip netns exec h2 rdma -dd resource show qp link sroce2/1
wait "$BG_PID" || true
tail -n 3 "$TEST_TMP/c.log"
show ip -n h2 -s link show w2
show rmmod sroce

touch "$SROCE_RESULTS/demo-ok"
[[ ${SROCE_VM_REBOOT:-0} == 1 ]] && { sync; echo b >/proc/sysrq-trigger; }
