#!/bin/bash
# MPI over UCX over sroce across the VMs: Debian's OpenMPI (pml ucx) runs a
# 3-rank job, one rank per node, whose collectives check their results
# (progs/mpi/mpi_check.c); UCX may use only the verbs transports
# (UCX_TLS=rc_verbs,ud_verbs plus self, no TCP, no shared memory) on
# sroce0, so the job either runs over sroce or fails; every node's sroce
# counters must move by the job's traffic. mpirun starts its daemons on
# the other nodes through cluster-agent.py as its remote shell
# (plm_rsh_agent) and talks to them over TCP on clu0. Then ucx_perftest
# (tag bandwidth and latency) between two nodes over rc_verbs, its numbers
# logged (a test asserts behaviour, it does not time).
#
# UCX 1.13's ud_verbs checks each received packet's destination GID, and
# takes the packet's L3 type from the work completion's SL field, which
# only mlx5 hardware fills that way: from any other provider (rxe too,
# checked) a RoCEv2-over-IPv4 packet is taken for IPv6, compared with the
# wrong bytes and dropped, and UCX ends with "UD endpoint ... unhandled
# timeout error". The job therefore runs twice: over the IPv4 GIDs UCX
# picks by itself, with that check off (UCX_UD_ETH_DGID_CHECK=n), and over
# the IPv6 GIDs (UCX_IB_GID_INDEX), with the check on.
# timeout: 600
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"

command -v mpirun >/dev/null || fail "mpirun not installed (openmpi-bin; tools/setup-host.sh installs it)"
command -v ucx_perftest >/dev/null || fail "ucx_perftest not installed (ucx-utils)"
[[ -x $SROCE_BIN/mpi_check ]] || fail "no mpi_check program (mpicc missing on the host?)"

hosts=
for ((n = 0; n < NODES; n++)); do
	sroce_on "$n"
	hosts+=${hosts:+,}$(ip_of "$n"):1
done
info=$(ucx_info -d)
grep -A4 'Device: sroce0:1' <<<"$info" | sed 's/^/# /' || true
for tl in rc_verbs ud_verbs; do
	grep -q "Transport: $tl" <<<"$info" || fail "UCX lists no $tl transport on this node"
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The IPv6 GID's index is the same on every node (same addresses, same order).
g6=$(gid_on 0 sroce0 "$(ip6_of 0)")
for ((n = 1; n < NODES; n++)); do
	assert_eq "$g6" "$(gid_on "$n" sroce0 "$(ip6_of "$n")")" "node $n's IPv6 GID index"
done

# mpi_job NAME UCX-SETTINGS...: the checked job, one rank per node, UCX
# restricted to the verbs transports on sroce0; every node's sroce0 must
# carry its traffic.
mpi_job() {
	local name=$1 rc=0 out n d
	shift
	local -A sent0=()
	for ((n = 0; n < NODES; n++)); do sent0[$n]=$(counter_on "$n" sroce0 sent_pkts); done
	local -a mpi=(mpirun -np "$NODES" --host "$hosts"
		--mca plm_rsh_agent "$SELFTESTS_DIR/cluster-agent.py run"
		--mca oob_tcp_if_include "$NETDEV" --mca btl self --mca pml ucx --mca osc ucx
		-x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=sroce0:1 -x PATH)
	for setting in "$@"; do mpi+=(-x "$setting"); done
	out=$(timeout $((300 * SCALE)) "${mpi[@]}" "$SROCE_BIN/mpi_check" 3 2>&1) || rc=$?
	printf '%s\n' "$out" | sed 's/^/#   /'
	((rc == 0)) || fail "the MPI job ($name) failed with status $rc"
	assert_contains "$out" "mpi_check: $NODES ranks, 3 rounds, all checks passed" "the MPI job's result ($name)"
	for ((n = 0; n < NODES; n++)); do
		d=$(($(counter_on "$n" sroce0 sent_pkts) - sent0[$n]))
		log "$name: node $n's sroce0 sent $d packets during the job"
		# Each rank sends several MiB (bcast, alltoall, ring), 1 KiB a packet.
		((d >= 3000)) || fail "node $n's sroce0 sent only $d packets: the job ($name) did not run over sroce"
	done
}
mpi_job "IPv4 GIDs" UCX_UD_ETH_DGID_CHECK=n
mpi_job "IPv6 GIDs" UCX_IB_GID_INDEX="$g6"

# ucx_perftest: server on node 1, client on node 0, RC (with UD for the
# connection's setup).
ucx_env=(UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=sroce0:1 UCX_UD_ETH_DGID_CHECK=n)
perf() { # TEST SIZE ITERS
	local t=$1 s=$2 i=$3 out
	on_bg 1 "$TEST_TMP/ucx-server.log" "${ucx_env[*]} ucx_perftest -p 13337"
	local srv=$BG_PID
	wait_listen_on 1 13337
	out=$(env "${ucx_env[@]}" timeout $((120 * SCALE)) \
		ucx_perftest "$(ip_of 1)" -p 13337 -t "$t" -s "$s" -n "$i" -w 10 2>&1) ||
		fail "ucx_perftest -t $t -s $s failed: $(tail -n 5 <<<"$out")"
	wait "$srv" || fail "ucx_perftest server failed: $(tail -n 5 "$TEST_TMP/ucx-server.log")"
	printf '%s\n' "$out" | grep -E '^Final:' | sed "s/^/# ucx_perftest $t $s: /"
	grep -qE '^Final:' <<<"$out" || fail "ucx_perftest -t $t -s $s printed no final line: $(tail -n 5 <<<"$out")"
}
perf tag_bw 65536 500
perf tag_lat 8 500
