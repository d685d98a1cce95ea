#!/usr/bin/env bash
# Runs sroce's cluster selftests (selftests/cluster/*.sh): boots N virtme-ng
# VMs (default 3) of the one test kernel, each its own host with its own
# sroce device, on one virtual Ethernet segment, and runs the tests on
# node 0, which drives the others through cluster-agent.py. Ends with the
# line "N passed, N failed[, N skipped]"; exit status 0 iff nothing failed
# and at least one test passed.
#
# The segment: every VM's virtio NIC is a QEMU socket netdev on one UDP
# multicast group bound to the host's loopback (`-netdev socket,mcast=
# 230.x.y.1:PORT,localaddr=127.0.0.1`), which needs no privileges, bridge
# or tap: each frame a VM sends reaches every other VM (and itself, which
# Ethernet tolerates). Group and port are random per run, so two runs on
# one host do not meet.
#
# The kernel: by default the distribution-style test kernel (kconfig/
# modular.config: the RDMA core and UDP tunnels as modules;
# SROCE_KERNEL_VARIANT=modular tools/build-kernel.sh builds it), with
# sroce.ko built for it from this source tree in a private copy (the
# tree's own sroce.ko is for the single-VM kernel) and installed with
# `make install`, so every node loads sroce, ib_core, ib_uverbs and the
# rest with modprobe, as installed modules are loaded.
#
# Usage: selftests/cluster.sh [TEST-NAME-GLOB...]
#        selftests/cluster.sh --bench    the workloads on rxe and sroce
#                                        (selftests/cluster-bench/, prints a table)
# Environment: SROCE_KEEP, SROCE_TIMEOUT_SCALE, SROCE_TEST_TIMEOUT,
#   SROCE_VM_VERBOSE as for run.sh, and
#   KDIR                 the VMs' kernel tree (default
#                        $SROCE_CACHE/kernel-modular)
#   SROCE_KO             a module built for KDIR (default: built here)
#   SROCE_CLUSTER_NODES  how many VMs (default 3, at least 2)
#   SROCE_CLUSTER_MEM    each VM's memory (default 1G)
#   SROCE_VM_TIMEOUT     seconds for the whole run (default 3600, 7200 with
#                        --bench; times SROCE_TIMEOUT_SCALE)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$PATH:/usr/sbin:/sbin"  # depmod
repo=$(cd "$here/.." && pwd)
# shellcheck source=../tools/lib.sh
. "$repo/tools/lib.sh"

KDIR=${KDIR:-$SROCE_CACHE/kernel-modular}
SROCE_KO=${SROCE_KO:-}
[[ -z $SROCE_KO || $SROCE_KO == /* ]] || SROCE_KO=$PWD/$SROCE_KO
bench=0
[[ ${1:-} == --bench ]] && bench=1 && shift
nodes=${SROCE_CLUSTER_NODES:-3}
scale=${SROCE_TIMEOUT_SCALE:-1}
# The tests' own limits add up to about 3000 s; a run takes about 450.
vm_timeout=${SROCE_VM_TIMEOUT:-$(((bench ? 7200 : 3600) * scale))}
test_timeout=${SROCE_TEST_TIMEOUT:-120}

summary_fail() {
	printf 'FAIL %s\n' "$1"
	printf '0 passed, 1 failed\n'
	exit 1
}
[[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 2 && nodes <= 9)) || summary_fail "setup: SROCE_CLUSTER_NODES must be 2..9"
[[ $scale =~ ^[1-9][0-9]*$ ]] || summary_fail "setup: SROCE_TIMEOUT_SCALE must be a positive integer"
KDIR=$(cd "$KDIR" 2>/dev/null && pwd -P) ||
	summary_fail "setup: no kernel tree at ${KDIR} (run SROCE_KERNEL_VARIANT=modular tools/build-kernel.sh)"
bzimage=$KDIR/arch/x86/boot/bzImage
[[ -f $bzimage ]] || summary_fail "setup: no $bzimage (run SROCE_KERNEL_VARIANT=modular tools/build-kernel.sh)"
command -v vng >/dev/null || summary_fail "setup: vng (virtme-ng) not found (run tools/setup-host.sh)"
[[ -z $SROCE_KO || -f $SROCE_KO ]] || summary_fail "setup: no module at $SROCE_KO"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sroce-cluster.XXXXXX")
results=$tmp/results
mkdir -p "$results"
pids=()
stop_nodes() {
	local p
	for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
	sleep 2
	for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
}
restore_rmem=
finish() {
	stop_nodes
	[[ -z $restore_rmem ]] || sysctl -qw net.core.rmem_default="$restore_rmem"
	if [[ ${SROCE_KEEP:-0} == 1 ]]; then
		echo "logs: $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap finish EXIT

bin=$tmp/bin
# shellcheck source=host-bin.sh
. "$here/host-bin.sh"
why=$(build_test_bin "$bin" mpi) || summary_fail "setup: $why"

# The test kernel's modules and sroce, installed as a distribution would
# (modules_install, then sroce's `make install`, depmod by both) into a
# staging root the guests load from with `modprobe -d`.
modroot=$tmp/modroot
release=$(cat "$KDIR/include/config/kernel.release") || summary_fail "setup: $KDIR has no kernel.release"
{
	make -s -C "$KDIR" modules_install INSTALL_MOD_PATH="$modroot" INSTALL_MOD_STRIP=1 || exit 1
	if [[ -z $SROCE_KO ]]; then
		# The source tree (tracked and new files, as they are now) copied,
		# so this build leaves the tree's own objects alone.
		# (Without git, or git refusing the checkout: the directories whole.)
		mkdir -p "$tmp/src"
		if files=$(cd "$repo" && git ls-files -co --exclude-standard -- Makefile Kbuild rust include 2>/dev/null) &&
			[[ -n $files ]]; then
			(cd "$repo" && while IFS= read -r f; do
				[[ -e $f ]] && printf '%s\0' "$f"
			done <<<"$files" | xargs -0 cp --parents -t "$tmp/src") || exit 1
		else
			cp -a "$repo/Makefile" "$repo/Kbuild" "$repo/rust" "$repo/include" "$tmp/src/" || exit 1
			rm -rf "$tmp/src/rust/proto/target" "$tmp/src/rust/proto/fuzz/target"
		fi
		make -s -C "$tmp/src" KDIR="$KDIR" modules || exit 1
		make -s -C "$tmp/src" KDIR="$KDIR" install INSTALL_MOD_PATH="$modroot" || exit 1
	else
		install -D -m 644 "$SROCE_KO" "$modroot/lib/modules/$release/updates/sroce.ko" &&
			depmod -b "$modroot" "$release" || exit 1
	fi
} >"$tmp/install.log" 2>&1 || summary_fail "setup: building or installing the modules failed: $(tail -n 5 "$tmp/install.log" | tr '\n' ' ')"
SROCE_KO=$modroot/lib/modules/$release/updates/sroce.ko
[[ -f $SROCE_KO ]] || summary_fail "setup: make install put no sroce.ko at $SROCE_KO"

group=230.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)).1
port=$((20000 + RANDOM % 20000))
mac=52:54:00:99:$(printf '%02x' $((RANDOM % 256))):

# The benchmark's settings, passed through as they are.
bench_env=()
for v in $(compgen -v SROCE_BENCH_); do bench_env+=("$v=${!v}"); done

accel_opts=(--disable-kvm)
[[ ${SROCE_VM_KVM:-0} == 1 && -w /dev/kvm ]] && accel_opts=()
kasan_opts=()
grep -qx 'CONFIG_KASAN=y' "$KDIR/.config" 2>/dev/null && kasan_opts=(--append kasan_multi_shot)

# vng_node I ARGS...: the vng command line of node I.
vng_node() {
	local i=$1 cmd
	shift
	cmd=$(printf '%q ' env SROCE_RESULTS="$results" SROCE_KO="$SROCE_KO" SROCE_KDIR="$KDIR" \
		RXE_KO="$KDIR/drivers/infiniband/sw/rxe/rdma_rxe.ko" SROCE_MODROOT="$modroot" \
		SROCE_TESTS_TYPE=sroce SROCE_TEST_TIMEOUT="$test_timeout" SROCE_TIMEOUT_SCALE="$scale" \
		SROCE_VM_REBOOT=1 SROCE_BIN="$bin" SROCE_CLUSTER_NODES="$nodes" SROCE_CLUSTER_MAC="$mac" \
		SROCE_CLUSTER_TESTS="$here/$( ((bench)) && echo cluster-bench || echo cluster)" "${bench_env[@]}" \
		bash "$here/cluster-node.sh" "$i" "$@")
	printf '%s\n' vng --verbose --run "$bzimage" --name "virtme-node$i" --cpus 1 \
		--memory "${SROCE_CLUSTER_MEM:-1G}" --append ib_core.force_mr=1 "${kasan_opts[@]}" "${accel_opts[@]}" \
		--qemu-opts="-netdev socket,id=clu,mcast=$group:$port,localaddr=127.0.0.1 -device virtio-net-pci,netdev=clu,mac=${mac}0$i" \
		--rwdir "$results" --cwd "$tmp" --exec "$cmd"
}

# The segment reaches each VM through its QEMU's UDP socket, whose receive
# buffer (net.core.rmem_default, 208 KiB on Debian) overflows whenever a
# TCG guest falls behind: 6% of the frames were lost that way in a run
# here (the host's Udp RcvbufErrors). RC recovers; UD and the timing of a
# benchmark suffer. Where we may (as root), the sockets the VMs open get
# 16 MiB: the host's default is raised until node 0 reports every node up
# (the sockets exist then) and restored at once.
rmem=$(sysctl -n net.core.rmem_default 2>/dev/null || echo)
if [[ -n $rmem ]] && ((rmem < 16777216)) && sysctl -qw net.core.rmem_default=16777216 2>/dev/null; then
	restore_rmem=$rmem
elif [[ -z $rmem ]] || ((rmem < 16777216)); then
	echo "# note: net.core.rmem_default stays $rmem (not root?): the segment may lose frames"
fi
udp_drops() { awk '/^Udp: [0-9]/ { print $6 }' /proc/net/snmp; }
drops0=$(udp_drops)

printf '# sroce cluster selftests: %d nodes, kernel %s, module %s, segment %s:%d\n' "$nodes" "$KDIR" "$SROCE_KO" "$group" "$port"
start=$SECONDS
# The peers first, each in its own process group (stop_nodes ends them).
for ((i = 1; i < nodes; i++)); do
	mapfile -t cmd < <(vng_node "$i")
	setsid timeout -k 20 "$vm_timeout" "${cmd[@]}" </dev/null >"$tmp/console-$i.log" 2>&1 &
	pids+=("$!")
done
mapfile -t cmd < <(vng_node 0 "$@")
show=${SROCE_VM_VERBOSE:-0}
timeout -k 20 "$vm_timeout" "${cmd[@]}" </dev/null 2>&1 |
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line//$'\r'/}
		printf '%s\n' "$line" >>"$tmp/console-0.log"
		[[ $line == "sroce selftests: "* || $line == "cluster node 0: "* ]] && show=1
		[[ $line == "cluster node 0: all "* && -n $restore_rmem ]] &&
			sysctl -qw net.core.rmem_default="$restore_rmem"
		[[ $show == 1 ]] && printf '%s\n' "$line"
	done
vm_rc=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))

# shellcheck source=host-results.sh
. "$here/host-results.sh"
count_results "$results"
if [[ ! -f $results/done ]]; then
	current=$(cat "$results/current" 2>/dev/null || true)
	why="node 0 exited with status $vm_rc before the tests finished"
	((vm_rc == 124 || vm_rc == 137)) && why="cluster run timed out after ${vm_timeout}s"
	printf 'FAIL cluster %s: %s\n' "${current:-boot}" "$why"
	for ((i = 0; i < nodes; i++)); do
		echo "  node $i console tail:"
		tail -n 15 "$tmp/console-$i.log" 2>/dev/null | sed 's/^/  | /'
	done
	failed=$((failed + 1))
fi
if ((passed + failed + skipped == 0)); then
	echo "FAIL cluster: no test ran (no tests matched '$*'?)"
	failed=1
fi
printf '# cluster run took %ds; the host dropped %d UDP datagrams meanwhile (RcvbufErrors: the segment'"'"'s losses)\n' \
	"$elapsed" $(($(udp_drops) - drops0))
if ((bench)); then
	grep -h '^|' "$results"/*.log 2>/dev/null
fi
print_summary
