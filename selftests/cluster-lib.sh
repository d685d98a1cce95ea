# Helpers for the cluster selftests (selftests/cluster/*.sh), which run on
# node 0 of a cluster of VMs (cluster.sh) and reach the other nodes through
# cluster-agent.py. Source it from a test; do not run it.
# shellcheck shell=bash
#
# Every node has the NIC clu0 on the cluster's segment, with 10.99.0.(N+1)
# and fd99::(N+1); `on N SCRIPT` runs a bash script on node N with the
# single-VM helpers (lib.sh) loaded, so the same functions work there.

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=vm-common.sh
. "$SELFTESTS_DIR/vm-common.sh"

NODES=$SROCE_CLUSTER_NODES
((NODES >= 2)) || fail "not in a cluster (SROCE_CLUSTER_NODES=$NODES; run selftests/cluster.sh)"
MODROOT=${SROCE_MODROOT:?SROCE_MODROOT must name the installed modules}
NETDEV=$CLUSTER_NETDEV
# The segment may drop frames (a QEMU socket's buffer overflowing, see
# cluster.sh): RC recovers, and the helpers accept what only loss explains
# (an ibv_rc_pingpong whose last ACK was lost, see _end_pair).
LOSSY_WIRE=1
ip_of() { cluster_ip "$1"; }

# need_nodes N: the test uses nodes 0..N-1.
need_nodes() {
	((NODES >= $1)) || skip "needs $1 nodes, the cluster has $NODES (SROCE_CLUSTER_NODES)"
}
ip6_of() { cluster_ip6 "$1"; }

# _script SCRIPT: SCRIPT with the helpers loaded and this test's settings.
_script() {
	printf 'export TEST_NAME=%q TEST_TMP=%q; . %q; %s' "$TEST_NAME" "$TEST_TMP" "$SELFTESTS_DIR/lib.sh" "$1"
}

# on N SCRIPT: run the bash SCRIPT on node N (node 0 is this one); its
# output comes here, its status is returned.
on() {
	local n=$1
	if ((n == 0)); then
		bash -c "$(_script "$2")"
	else
		python3 "$SELFTESTS_DIR/cluster-agent.py" run "$(ip_of "$n")" "$(_script "$2")"
	fi
}

# on_bg N LOG SCRIPT: start SCRIPT on node N in the background, output to
# LOG; $BG_PID is the local process whose end (killed at the test's exit)
# also ends the remote command.
on_bg() {
	local n=$1 logf=$2
	if ((n == 0)); then
		bg_in - "$logf" bash -c "$(_script "$3")"
	else
		bg_in - "$logf" python3 "$SELFTESTS_DIR/cluster-agent.py" run "$(ip_of "$n")" "$(_script "$3")"
	fi
	BG_CMD="node $n: $3"
}

# wait_listen_on N PORT [SECONDS=20]: a TCP socket listens on PORT on node
# N (the last on_bg server); fails early if that server ends.
wait_listen_on() {
	local n=$1 port=$2 deadline=$((SECONDS + ${3:-20} * SCALE)) rc=0
	while :; do
		on "$n" "ss -Hltn 'sport = :$port' | grep -q ." >/dev/null 2>&1 && return 0
		if ! kill -0 "$BG_PID" 2>/dev/null; then
			wait "$BG_PID" 2>/dev/null || rc=$?
			sed 's/^/#   /' "$BG_LOG"
			fail "'$BG_CMD' exited with status $rc before listening on port $port"
		fi
		((SECONDS < deadline)) || fail "nothing listens on TCP port $port on node $n ($BG_CMD)"
		sleep 0.5
	done
}

# pair_on SRV_NODE "SRV_CMD" CLI_NODE "CLI_CMD" [PORT]: run_pair across
# nodes: the server on one node, the client (limited to 120 s) on another;
# both must succeed. Outputs in $TEST_TMP/{server,client}.log, the client's
# also in $CLIENT_OUT.
pair_on() {
	local sn=$1 scmd=$2 cn=$3 ccmd=$4 port=${5:-$OOB_PORT} srv rc=0
	local -a sarr carr
	read -ra sarr <<<"$scmd"
	read -ra carr <<<"$ccmd"
	with_qp_timeout sarr
	with_qp_timeout carr
	scmd=${sarr[*]} ccmd=${carr[*]}
	on_bg "$sn" "$TEST_TMP/server.log" "$scmd"
	srv=$BG_PID
	wait_listen_on "$sn" "$port"
	on "$cn" "timeout $((120 * SCALE)) $ccmd" >"$TEST_TMP/client.log" 2>&1 || rc=$?
	_end_pair "$srv" "$rc" "node $sn" "$scmd" "node $cn" "$ccmd"
}

# USER_MODULES: what a distribution's rdma-core loads (udev) once an RDMA
# device exists: the verbs and rdma_cm userspace interfaces.
USER_MODULES="ib_uverbs rdma_ucm"

# sroce_on N [DEV=sroce0]: load sroce on node N the way an installed module
# is loaded (modprobe, dependencies from depmod) and bind DEV to its clu0.
sroce_on() {
	local dev=${2:-sroce0}
	on "$1" "modprobe -d $MODROOT sroce && modprobe -d $MODROOT -a $USER_MODULES &&
		add_link - $dev $NETDEV sroce && wait_port_active $dev" ||
		fail "no sroce device $dev on node $1"
}

# rxe_on N [DEV=rxe0]: the kernel's rxe on node N instead.
rxe_on() {
	local dev=${2:-rxe0}
	on "$1" "modprobe -d $MODROOT rdma_rxe && modprobe -d $MODROOT -a $USER_MODULES &&
		add_link - $dev $NETDEV rxe && wait_port_active $dev" ||
		fail "no rxe device $dev on node $1"
}

# gid_on N DEV [ADDR=node N's IPv4] [TYPE]: the GID index of ADDR on node N.
gid_on() {
	on "$1" "gid_index $2 ${3:-$(ip_of "$1")} ${4:+'$4'}"
}

# counter_on N DEV NAME: a hw counter of DEV's port 1 on node N (fails
# the test unless it is a number).
counter_on() {
	local v
	v=$(on "$1" "cat /sys/class/infiniband/$2/ports/1/hw_counters/$3" 2>&1) || true
	[[ $v =~ ^[0-9]+$ ]] || fail "node $1: no counter $3 of $2: $v"
	echo "$v"
}
