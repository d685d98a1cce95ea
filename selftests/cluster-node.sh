#!/bin/bash
# Runs inside each VM of a cluster (started by cluster.sh through vng
# --exec): configures the node's NIC on the cluster's segment, makes
# modprobe find the test kernel's modules, starts the command agent; node 0
# then waits for its peers and runs the cluster tests with vm-main.sh.
#
# Usage: cluster-node.sh NODE [TEST-NAME-GLOB...]
# Environment: SROCE_CLUSTER_NODES (how many), SROCE_MODROOT (the modules
#   installed by `make modules_install`/`make install` into a staging
#   root), SROCE_CLUSTER_MAC (the NICs' MAC prefix), and what vm-main.sh
#   and lib.sh read.
set -uo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
node=${1:?usage: cluster-node.sh NODE [TEST-NAME-GLOB...]}
shift
results=${SROCE_RESULTS:?SROCE_RESULTS must name the results directory}
# shellcheck source=vm-common.sh
. "$here/vm-common.sh"

say "cluster node $node: kernel $(uname -r), $(nproc) cpus"
# However this script ends (a setup failure, a peer that never answers, the
# agent gone), the VM ends: the kernel has no ACPI power-off, and a halted
# QEMU would wait for the whole run's timeout. (vm-main.sh, which node 0
# execs, reboots by itself.)
[[ $(cat /proc/sys/kernel/hostname) == virtme* ]] && trap 'sync; echo b >/proc/sysrq-trigger' EXIT

# The NIC on the cluster's segment, found by its MAC (the kernel may have
# made other net devices), renamed so every node has the same name.
nic=
for d in /sys/class/net/*; do
	[[ $(cat "$d/address" 2>/dev/null) == "${SROCE_CLUSTER_MAC:?}"* ]] && nic=${d##*/}
done
[[ -n $nic ]] || { say "cluster node $node: no NIC with MAC ${SROCE_CLUSTER_MAC}*"; exit 1; }
ip link set "$nic" down
[[ $nic == "$CLUSTER_NETDEV" ]] || ip link set "$nic" name "$CLUSTER_NETDEV"
ip addr add "$(cluster_ip "$node")/24" dev "$CLUSTER_NETDEV"
ip addr add "$(cluster_ip6 "$node")/64" dev "$CLUSTER_NETDEV" nodad
ip link set "$CLUSTER_NETDEV" up
setup_vm

# The kernel's request_module runs a modprobe that loads from the staging
# root, where depmod resolved the dependencies (tests run `modprobe -d
# $SROCE_MODROOT` themselves).
release=$(uname -r)
if [[ -d ${SROCE_MODROOT:-}/lib/modules/$release ]]; then
	printf '#!/bin/sh\nexec /sbin/modprobe -d %q "$@"\n' "$SROCE_MODROOT" >/run/sroce-modprobe
	chmod +x /run/sroce-modprobe
	echo /run/sroce-modprobe >/proc/sys/kernel/modprobe
else
	say "cluster node $node: no modules for $release under ${SROCE_MODROOT:-<unset>}"
fi
python3 "$here/cluster-agent.py" serve &
agent=$!

if ((node != 0)); then
	say "cluster node $node: $(cluster_ip "$node") on $CLUSTER_NETDEV, agent up"
	# Until node 0 is done; cluster.sh then stops this VM.
	wait "$agent"
	exit 0
fi

for ((n = 1; n < SROCE_CLUSTER_NODES; n++)); do
	if ! python3 "$here/cluster-agent.py" wait "$(cluster_ip "$n")" $((300 * ${SROCE_TIMEOUT_SCALE:-1})); then
		say "cluster node 0: node $n ($(cluster_ip "$n")) did not answer"
		exit 1
	fi
done
say "cluster node 0: all $SROCE_CLUSTER_NODES nodes answer"
SROCE_TESTS_DIR=${SROCE_CLUSTER_TESTS:-$here/cluster} exec bash "$here/vm-main.sh" "$@"
