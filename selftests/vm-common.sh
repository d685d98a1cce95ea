# What every test VM does around the tests: the guest's mounts, the
# cleanup between tests, the kernel-log check. Sourced by vm-main.sh (the
# test runner) and, in a cluster, by the commands node 0 runs on its peers
# (cluster-agent.py). Source it; do not run it.
# shellcheck shell=bash

# Kernel log lines that fail the test during which they appear.
bad_klog='WARNING:|BUG:|Oops|Call Trace|refcount_t|general protection|kernel BUG|UBSAN|KASAN|panicked|rust_panic|[Ll]eak|blocked for more than'

say() { printf '%s\n' "$*"; }

setup_vm() {
	mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config 2>/dev/null || true
	mountpoint -q /dev/pts || { mkdir -p /dev/pts && mount -t devpts devpts /dev/pts; } 2>/dev/null || true
	# ip netns keeps its bind mounts under /run/netns.
	mkdir -p /run/netns 2>/dev/null || true
	ulimit -l unlimited 2>/dev/null || true
	# Keep kernel messages off the console so the stream stays readable;
	# an Oops or panic still reaches it (they raise the console loglevel),
	# and the full kernel log is checked via dmesg after each test.
	dmesg -n 1 2>/dev/null || true
	ip link set lo up 2>/dev/null || true
	base_netdevs=$(ls /sys/class/net)
	# For the cleanup a cluster's node 0 runs on this node later.
	printf '%s\n' "$base_netdevs" >/run/sroce-base-netdevs 2>/dev/null || true
	scratch=$(mktemp -d /tmp/sroce-selftests.XXXXXX 2>/dev/null) || {
		scratch=$results/tmp
		mkdir -p "$scratch"
	}
}

# Remove what a test may have left: its processes, rdma links, netns,
# netdevs in the init netns, and the provider modules. Prints what it had
# to do; returns 1 if a module stayed loaded (a reference leak).
cleanup_between() {
	local ns d m rc=0
	[[ -n ${base_netdevs:-} ]] || base_netdevs=$(cat /run/sroce-base-netdevs 2>/dev/null)
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -9 "$p" 2>/dev/null && say "cleanup: killed pid $p in netns $ns"
		done
	done
	for d in /sys/class/infiniband/*; do
		[[ -e $d ]] || continue
		rdma link delete "${d##*/}" 2>/dev/null && say "cleanup: deleted rdma link ${d##*/}"
	done
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		ip netns del "$ns" && say "cleanup: deleted netns $ns"
	done
	for d in /sys/class/net/*; do
		d=${d##*/}
		grep -qx -- "$d" <<<"$base_netdevs" && continue
		ip link del "$d" 2>/dev/null && say "cleanup: deleted netdev $d"
	done
	for m in sroce rdma_rxe; do
		[[ -d /sys/module/$m ]] || continue
		local deadline=$((SECONDS + 10)) ok=0
		while ((SECONDS < deadline)); do
			if rmmod "$m" 2>/dev/null; then
				ok=1
				break
			fi
			sleep 0.5
		done
		if ((ok)); then
			say "cleanup: unloaded $m"
		else
			say "cleanup: module $m is still in use after the test: $(rmmod "$m" 2>&1)"
			rc=1
		fi
	done
	return $rc
}

# klog_since TOKEN: kernel log lines after the marker line holding TOKEN.
klog_since() {
	dmesg 2>/dev/null | awk -v tok="$1" 'found { print } index($0, tok) { found = 1 }'
}


# ------------------------------------------------------------ cluster
# A cluster (cluster.sh) is N VMs on one virtual Ethernet segment; node I
# has the NIC clu0 with 10.99.0.(I+1)/24 and fd99::(I+1)/64. Node 0 runs
# the tests and reaches the others through cluster-agent.py.

SROCE_CLUSTER_NODES=${SROCE_CLUSTER_NODES:-1}
CLUSTER_NETDEV=clu0
cluster_ip() { echo "10.99.0.$(($1 + 1))"; }
cluster_ip6() { echo "fd99::$(($1 + 1))"; }

# on_node N SCRIPT: run the bash SCRIPT on node N (with this file sourced),
# its output here, its exit status returned (124: no answer in time).
on_node() {
	local dir
	dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	timeout $((120 * ${SROCE_TIMEOUT_SCALE:-1})) \
		python3 "$dir/cluster-agent.py" run "$(cluster_ip "$1")" ". '$dir/vm-common.sh'; $2"
}

# reset_cluster_node: undo what a cluster test may have left behind before
# the generic cleanup deletes the rdma links: NFS mounts, NVMe-oF
# connections, an NFS server, qdiscs on clu0 (netem, ingress filters), clu0
# down.
# Returns 1 (and says what) if something could not be undone.
reset_cluster_node() {
	[[ -e /sys/class/net/$CLUSTER_NETDEV ]] || return 0
	local rc=0 t=$((60 * ${SROCE_TIMEOUT_SCALE:-1}))
	if grep -qE ' nfs4? ' /proc/mounts; then
		timeout "$t" umount -f -l -a -t nfs,nfs4 && say "cleanup: unmounted NFS" ||
			{ say "cleanup: could not unmount NFS"; rc=1; }
	fi
	if command -v nvme >/dev/null && ls /sys/class/nvme/ 2>/dev/null | grep -q .; then
		timeout "$t" nvme disconnect-all >/dev/null 2>&1 && say "cleanup: disconnected NVMe controllers" ||
			{ say "cleanup: could not disconnect NVMe controllers"; rc=1; }
	fi
	if [[ -e /proc/fs/nfsd/threads && $(cat /proc/fs/nfsd/threads 2>/dev/null) != 0 ]]; then
		timeout "$t" rpc.nfsd 0 2>/dev/null && say "cleanup: stopped nfsd" ||
			{ say "cleanup: could not stop nfsd"; rc=1; }
	fi
	tc qdisc del dev "$CLUSTER_NETDEV" root 2>/dev/null && say "cleanup: removed $CLUSTER_NETDEV's qdisc"
	tc qdisc del dev "$CLUSTER_NETDEV" ingress 2>/dev/null && say "cleanup: removed $CLUSTER_NETDEV's ingress qdisc"
	ip link set "$CLUSTER_NETDEV" up
	return $rc
}
