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
# Usage: selftests/cluster.sh [TEST-NAME-GLOB...]
# Environment: KDIR, SROCE_KO, SROCE_KEEP, SROCE_TIMEOUT_SCALE,
#   SROCE_TEST_TIMEOUT, SROCE_VM_VERBOSE as for run.sh, and
#   SROCE_CLUSTER_NODES  how many VMs (default 3, at least 2)
#   SROCE_CLUSTER_MEM    each VM's memory (default 1G)
#   SROCE_VM_TIMEOUT     seconds for the whole run (default 1800)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=../tools/lib.sh
. "$repo/tools/lib.sh"

KDIR=${KDIR:-$SROCE_CACHE/kernel}
SROCE_KO=${SROCE_KO:-$repo/sroce.ko}
[[ $SROCE_KO == /* ]] || SROCE_KO=$PWD/$SROCE_KO
nodes=${SROCE_CLUSTER_NODES:-3}
scale=${SROCE_TIMEOUT_SCALE:-1}
vm_timeout=${SROCE_VM_TIMEOUT:-$((1800 * scale))}
test_timeout=${SROCE_TEST_TIMEOUT:-120}

summary_fail() {
	printf 'FAIL %s\n' "$1"
	printf '0 passed, 1 failed\n'
	exit 1
}
[[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 2 && nodes <= 9)) || summary_fail "setup: SROCE_CLUSTER_NODES must be 2..9"
[[ $scale =~ ^[1-9][0-9]*$ ]] || summary_fail "setup: SROCE_TIMEOUT_SCALE must be a positive integer"
KDIR=$(cd "$KDIR" 2>/dev/null && pwd -P) || summary_fail "setup: no kernel tree at ${KDIR} (run tools/build-kernel.sh)"
bzimage=$KDIR/arch/x86/boot/bzImage
[[ -f $bzimage ]] || summary_fail "setup: no $bzimage (run tools/build-kernel.sh)"
command -v vng >/dev/null || summary_fail "setup: vng (virtme-ng) not found (run tools/setup-host.sh)"
[[ -f $SROCE_KO ]] || summary_fail "setup: no module at $SROCE_KO"

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
if [[ ${SROCE_KEEP:-0} == 1 ]]; then
	trap 'stop_nodes; echo "logs: $tmp" >&2' EXIT
else
	trap 'stop_nodes; rm -rf "$tmp"' EXIT
fi

bin=$tmp/bin
# shellcheck source=host-bin.sh
. "$here/host-bin.sh"
why=$(build_test_bin "$bin") || summary_fail "setup: $why"

# The test kernel's modules and sroce, installed as a distribution would
# (modules_install, then sroce's `make install`, depmod by both) into a
# staging root the guests load from with `modprobe -d`.
modroot=$tmp/modroot
{
	make -s -C "$KDIR" modules_install INSTALL_MOD_PATH="$modroot" INSTALL_MOD_STRIP=1 &&
		if [[ $SROCE_KO == "$repo/sroce.ko" ]]; then
			make -s -C "$repo" KDIR="$KDIR" install INSTALL_MOD_PATH="$modroot"
		else
			# A module built elsewhere: placed as `make install` would.
			release=$(cat "$KDIR/include/config/kernel.release") &&
				install -D -m 644 "$SROCE_KO" "$modroot/lib/modules/$release/updates/sroce.ko" &&
				depmod -b "$modroot" "$release"
		fi
} >"$tmp/install.log" 2>&1 || summary_fail "setup: installing the modules failed: $(tail -n 3 "$tmp/install.log" | tr '\n' ' ')"

group=230.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)).1
port=$((20000 + RANDOM % 20000))
mac=52:54:00:99:$(printf '%02x' $((RANDOM % 256))):

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
		bash "$here/cluster-node.sh" "$i" "$@")
	printf '%s\n' vng --verbose --run "$bzimage" --name "virtme-node$i" --cpus 1 \
		--memory "${SROCE_CLUSTER_MEM:-1G}" --append ib_core.force_mr=1 "${kasan_opts[@]}" "${accel_opts[@]}" \
		--qemu-opts="-netdev socket,id=clu,mcast=$group:$port,localaddr=127.0.0.1 -device virtio-net-pci,netdev=clu,mac=${mac}0$i" \
		--rwdir "$results" --cwd "$tmp" --exec "$cmd"
}

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
		[[ $show == 1 ]] && printf '%s\n' "$line"
	done
vm_rc=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))

passed=0 failed=0 skipped=0
if [[ -f $results/results ]]; then
	passed=$(grep -c '^ok ' "$results/results")
	failed=$(grep -c '^FAIL ' "$results/results")
	skipped=$(grep -c '^skip ' "$results/results")
fi
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
printf '# cluster run took %ds\n' "$elapsed"
if ((skipped > 0)); then
	printf '%d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
else
	printf '%d passed, %d failed\n' "$passed" "$failed"
fi
((failed == 0 && passed > 0))
