#!/usr/bin/env bash
# Runs sroce's selftests: boots ONE virtme-ng VM on the test kernel, runs
# selftests/vm-main.sh in it, streams the per-test result lines, and ends
# with the line "N passed, N failed[, N skipped]".
# Exit status: 0 iff nothing failed and at least one test passed.
#
# Usage: selftests/run.sh [TEST-NAME-GLOB...]     e.g. run.sh '3*' 10-load-unload
#        selftests/run.sh --demo                   the README's demo instead of tests
#        selftests/run.sh --bench                  the sroce/rxe benchmark instead of tests
#        selftests/run.sh --bench-sessions         the two-path sessions benchmark
#
# Environment:
#   KDIR               kernel tree (default $SROCE_CACHE/kernel, made by
#                      tools/build-kernel.sh)
#   SROCE_KO           module under test (default <repo>/sroce.ko)
#   SROCE_TESTS_TYPE   sroce (default) or rxe: run the generic tests against
#                      the kernel's rdma_rxe instead (to validate the tests)
#   SROCE_VM_TIMEOUT   seconds for the whole VM run (default 2400, 7200
#                      for the benchmarks)
#   SROCE_TEST_TIMEOUT default per-test timeout in seconds (default 120)
#   SROCE_TIMEOUT_SCALE multiplies every timeout (default 1; a debug
#                      kernel, KASAN + lockdep under TCG, needs about 4)
#   SROCE_VM_KVM=1     try KVM (default is TCG: nested KVM hangs here)
#   SROCE_VM_MEM       guest memory (default 2G); SROCE_VM_CPUS (default 2)
#   SROCE_KEEP=1       keep the results directory (logs) and print its path
#   SROCE_VM_VERBOSE=1 also stream the guest's boot log
#   SROCE_BENCH_*      the benchmarks' settings (see bench-vm.sh)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=../tools/lib.sh
. "$repo/tools/lib.sh"

demo=0 bench=0
case ${1:-} in
--demo) demo=1 && shift ;;
--bench) bench=1 && shift ;;
--bench-sessions) bench=2 && shift ;;
esac

KDIR=${KDIR:-$SROCE_CACHE/kernel}
SROCE_KO=${SROCE_KO:-$repo/sroce.ko}
[[ $SROCE_KO == /* ]] || SROCE_KO=$PWD/$SROCE_KO
SROCE_TESTS_TYPE=${SROCE_TESTS_TYPE:-sroce}
scale=${SROCE_TIMEOUT_SCALE:-1}
[[ $scale =~ ^[1-9][0-9]*$ ]] || { echo "SROCE_TIMEOUT_SCALE must be a positive integer" >&2; exit 2; }
# A benchmark runs the perftest matrix several times on two providers.
vm_timeout=${SROCE_VM_TIMEOUT:-$(((bench ? 7200 : 2400) * scale))}
test_timeout=${SROCE_TEST_TIMEOUT:-120}

summary_fail() {
	# Something kept the VM from running at all: one failure, and the summary.
	printf 'FAIL %s\n' "$1"
	printf '0 passed, 1 failed\n'
	exit 1
}

KDIR=$(cd "$KDIR" 2>/dev/null && pwd -P) || summary_fail "setup: no kernel tree at ${KDIR} (run tools/build-kernel.sh)"
bzimage=$KDIR/arch/x86/boot/bzImage
[[ -f $bzimage ]] || summary_fail "setup: no $bzimage (run tools/build-kernel.sh)"
rxe_ko=$KDIR/drivers/infiniband/sw/rxe/rdma_rxe.ko
command -v vng >/dev/null || summary_fail "setup: vng (virtme-ng) not found (run tools/setup-host.sh)"
case $SROCE_TESTS_TYPE in
sroce | rxe) ;;
*) summary_fail "setup: SROCE_TESTS_TYPE must be sroce or rxe, not '$SROCE_TESTS_TYPE'" ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sroce-selftests.XXXXXX")
results=$tmp/results
mkdir -p "$results"
console=$tmp/console.log
if [[ ${SROCE_KEEP:-0} == 1 ]]; then
	trap 'echo "logs: $tmp" >&2' EXIT
else
	trap 'rm -rf "$tmp"' EXIT
fi

# The tests' programs and the control tool, built on the host; the guest
# runs them from the shared filesystem.
bin=$tmp/bin
# shellcheck source=host-bin.sh
. "$here/host-bin.sh"
why=$(build_test_bin "$bin") || summary_fail "setup: $why"

# `make install` (the kernel's modules_install and depmod) into a staging
# root: 10-load-unload loads sroce from there the way an installed module
# is loaded. Only for the tree's own module, which is what make installs.
if [[ $SROCE_KO == "$repo/sroce.ko" && -f $SROCE_KO ]]; then
	make -s -C "$repo" KDIR="$KDIR" install INSTALL_MOD_PATH="$results/modroot" >"$tmp/install.log" 2>&1 ||
		summary_fail "setup: make install INSTALL_MOD_PATH=... failed: $(tail -n 3 "$tmp/install.log" | tr '\n' ' ')"
fi

guest_script=$here/vm-main.sh
((demo)) && guest_script=$here/demo-vm.sh
((bench == 1)) && guest_script=$here/bench-vm.sh
((bench == 2)) && guest_script=$here/bench-sessions-vm.sh

# The benchmarks' settings, passed through as they are.
bench_env=()
for v in $(compgen -v SROCE_BENCH_); do bench_env+=("$v=${!v}"); done
# The command run in the guest. The guest sees the host's root filesystem
# read-only at the same paths, plus $results read-write.
guest_cmd=$(printf '%q ' env \
	SROCE_RESULTS="$results" SROCE_KO="$SROCE_KO" RXE_KO="$rxe_ko" SROCE_KDIR="$KDIR" \
	SROCE_TESTS_TYPE="$SROCE_TESTS_TYPE" SROCE_TEST_TIMEOUT="$test_timeout" SROCE_TIMEOUT_SCALE="$scale" SROCE_VM_REBOOT=1 \
	SROCE_BIN="$bin" "${bench_env[@]}" bash "$guest_script" "$@")

# --verbose: the guest's console is the only output channel that always
# works (without CONFIG_INOTIFY_USER, udevd does not make the
# /dev/virtio-ports links, and virtme-ng-init falls back to running the
# script on the console). The boot log is kept out of the stream (it goes
# to the console log only) until vm-main.sh prints its banner.
# ib_core.force_mr=1: kernel users of the core's rdma_rw API (nvmet in
# 93-nvme-rdma) register memory for every RDMA READ/WRITE, which exercises
# fast registration and local invalidate; no other test uses rdma_rw.
vng_cmd=(vng --verbose --run "$bzimage" --cpus "${SROCE_VM_CPUS:-2}" --memory "${SROCE_VM_MEM:-2G}"
	--append ib_core.force_mr=1
	--rwdir "$results" --cwd "$tmp" --exec "$guest_cmd")
# A benchmark keeps the TSC as its clock: on a busy host the clocksource
# watchdog may find a TCG guest's TSC skewed and switch to the HPET, whose
# every read is an emulated MMIO access, and timing-heavy code slows down
# in the middle of a run.
((bench)) && vng_cmd+=(--append tsc=reliable)
# A KASAN kernel reports only its first bad access unless told otherwise;
# each test should see its own report.
grep -qx 'CONFIG_KASAN=y' "$KDIR/.config" 2>/dev/null && vng_cmd+=(--append kasan_multi_shot)
if [[ ${SROCE_VM_KVM:-0} == 1 && -w /dev/kvm ]]; then
	accel=kvm
else
	vng_cmd+=(--disable-kvm)
	accel=tcg
fi
printf '# sroce selftests: %s, %s, kernel %s, %s\n' "$SROCE_TESTS_TYPE" "$accel" "$KDIR" \
	"$([[ -f $SROCE_KO ]] && echo "module $SROCE_KO" || echo "no module at $SROCE_KO")"
printf '# %s\n' "$(printf '%q ' timeout -k 20 "$vm_timeout" "${vng_cmd[@]}")"

start=$SECONDS
# timeout (not --foreground) signals its whole process group, QEMU included.
# Guest lines are streamed as they come; the console is also kept for the
# tail shown when the VM dies.
# A kernel that reports a bug before the guest script starts (an early
# KASAN report repeats under kasan_multi_shot) is stopped at once: nothing
# it would run could be trusted, and waiting would take the whole timeout.
boot_bug=$tmp/boot-bug
show=${SROCE_VM_VERBOSE:-0}
started=0
timeout -k 20 "$vm_timeout" "${vng_cmd[@]}" </dev/null 2>&1 |
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line//$'\r'/}
		printf '%s\n' "$line" >>"$console"
		if [[ $line == "sroce selftests: "* || $line == "sroce demo: "* || $line == "sroce bench: "* ]]; then
			show=1 started=1
		fi
		[[ $show == 1 ]] && printf '%s\n' "$line"
		if ((!started)) && [[ ! -e $boot_bug && $line =~ \]\ (BUG:|Oops:|Kernel\ panic) ]]; then
			printf '%s\n' "$line" >"$boot_bug"
			# timeout leads its own process group: it passes the signal on.
			pkill -TERM -P $$ -x timeout || true
		fi
	done
vm_rc=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))
if [[ -e $boot_bug ]]; then
	printf 'FAIL boot: the kernel reported a bug before the guest script started (VM stopped)\n'
	echo "  console, from the report:"
	grep -n -m1 -F -f "$boot_bug" "$console" | cut -d: -f1 | {
		read -r from && sed -n "${from},$((from + 40))p" "$console" | sed 's/^/  | /'
	}
	printf '0 passed, 1 failed\n'
	exit 1
fi

if ((bench)); then
	printf '# bench took %ds\n' "$elapsed"
	[[ -f $results/bench-ok ]] || { echo "bench did not finish (VM status $vm_rc)"; tail -n 40 "$console"; exit 1; }
	exit 0
fi
if ((demo)); then
	printf '# demo took %ds\n' "$elapsed"
	[[ -f $results/demo-ok ]] || { echo "demo failed (VM status $vm_rc)"; tail -n 40 "$console"; exit 1; }
	exit 0
fi

# shellcheck source=host-results.sh
. "$here/host-results.sh"
count_results "$results"
if [[ ! -f $results/done ]]; then
	# The VM died, hung or never got to run vm-main.sh.
	current=$(cat "$results/current" 2>/dev/null || true)
	why="VM exited with status $vm_rc before the tests finished"
	((vm_rc == 124 || vm_rc == 137)) && why="VM run timed out after ${vm_timeout}s"
	printf 'FAIL %s: %s\n' "${current:-vm}" "$why"
	echo "  console tail:"
	tail -n 40 "$console" | sed 's/^/  | /'
	if [[ -n $current && -f $results/$current.log ]]; then
		echo "  last lines of $current.log:"
		tail -n 20 "$results/$current.log" | sed 's/^/  | /'
	fi
	failed=$((failed + 1))
fi
if ((passed + failed + skipped == 0)); then
	echo "FAIL vm: no test ran (no tests matched '$*'?)"
	failed=1
fi
printf '# VM run took %ds\n' "$elapsed"
print_summary
