#!/usr/bin/env bash
# All tests: host tests of the protocol core, lint gates on the kernel
# module, then the VM selftests. Last line: "total: N passed, N failed".
#
# --debug-kernel: the same against a KASAN + lockdep kernel (kconfig/
# debug.config), built with clang (LLVM=-19, as Rust with KASAN requires)
# and cached apart from the normal one; sroce.ko is built with clang too,
# every timeout is scaled by 4, and any KASAN, lockdep or other kernel
# report fails the test that caused it.
set -uo pipefail
case ${1:-} in
--debug-kernel) export SROCE_DEBUG_KERNEL=1 SROCE_TIMEOUT_SCALE=${SROCE_TIMEOUT_SCALE:-4} ;;
"") ;;
*) echo "usage: $0 [--debug-kernel]" >&2; exit 2 ;;
esac
. "$(dirname "$0")/lib.sh"
cd "$SROCE_ROOT"

kdir=$(bash tools/prepare.sh) || die "preparation failed"
export KDIR=$kdir

passed=0 failed=0
step() { # name, command...
	local name=$1; shift
	log "== $name"
	if "$@"; then
		passed=$((passed + 1)); echo "ok $name"
	else
		failed=$((failed + 1)); echo "FAIL $name"
	fi
}

# Host tests: count cargo's own results.
cargo_log=$(mktemp)
if cargo test --workspace 2>&1 | tee "$cargo_log"; then :; else failed=$((failed + 1)); echo "FAIL cargo test"; fi
read -r cp cf < <(awk '/^test result:/ {p += $4; f += $6} END {print p+0, f+0}' "$cargo_log")
passed=$((passed + cp)); failed=$((failed + cf))
rm -f "$cargo_log"

step "cargo clippy (protocol core)" cargo clippy --workspace --all-targets -q -- -D warnings
step "cargo fmt" cargo fmt --all --check
step "cargo doc (no broken links)" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
step "rustfmt (kernel crate)" rustfmt --check --edition 2021 --config-path "$kdir/.rustfmt.toml" rust/sroce_main.rs
step "module build with CLIPPY=1" bash -c 'touch rust/sroce_main.rs && make -s KDIR="$KDIR" CLIPPY=1 modules'
# KASAN's stack redzones enlarge every frame of the debug build: the
# kernel's frame limit is checked on the normal one.
[[ $SROCE_DEBUG_KERNEL == 1 ]] ||
	step "stack frames within CONFIG_FRAME_WARN" bash tools/check-frames.sh
step "DKMS build (dkms.conf)" bash tools/check-dkms.sh

# vm_suite NAME COMMAND...: run a VM suite (one VM, or the cluster of VMs)
# and count the results from its summary line.
vm_suite() {
	local name=$1 vm_log vm_rc vp vf
	shift
	vm_log=$(mktemp)
	"$@" 2>&1 | tee "$vm_log"
	vm_rc=${PIPESTATUS[0]}
	read -r vp vf < <(tail -n 1 "$vm_log" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p'; echo)
	rm -f "$vm_log"
	if [[ -z ${vp:-} ]]; then
		failed=$((failed + 1)); echo "FAIL $name printed no summary"
	else
		passed=$((passed + vp)); failed=$((failed + vf))
		((vm_rc == 0 || vf > 0)) || { failed=$((failed + 1)); echo "FAIL $name exited $vm_rc"; }
	fi
}
vm_suite "VM selftests" bash selftests/run.sh
# The cluster's VMs run the distribution-style kernel (the RDMA core and UDP
# tunnels as modules; sroce.ko is built for it by cluster.sh); the debug
# mode keeps its one kernel and module.
if [[ $SROCE_DEBUG_KERNEL == 1 ]]; then
	vm_suite "cluster selftests" env KDIR="$kdir" SROCE_KO="$SROCE_ROOT/sroce.ko" bash selftests/cluster.sh
elif ckdir=$(SROCE_KERNEL_VARIANT=modular bash tools/build-kernel.sh); then
	vm_suite "cluster selftests" env KDIR="$ckdir" bash selftests/cluster.sh
else
	failed=$((failed + 1)); echo "FAIL building the cluster's kernel (kconfig/modular.config)"
fi

echo "total: $passed passed, $failed failed"
((failed == 0 && passed > 0))
