#!/bin/bash
# Runs inside the test VM (as root; started by run.sh through vng --exec):
# runs each selftests/tests/*.sh as its own bash with a timeout, checks the
# kernel log after each, cleans up between tests, and records results.
#
# Usage: vm-main.sh [TEST-NAME-GLOB...]
# Environment: SROCE_RESULTS (writable directory shared with the host),
#   SROCE_TEST_TIMEOUT (seconds, default 120; a test may override it with a
#   line "# timeout: N" near its top), plus what lib.sh reads (SROCE_KO,
#   RXE_KO, SROCE_TESTS_TYPE).
#
# Results: one line per test in $SROCE_RESULTS/results ("ok NAME",
# "FAIL NAME: why", "skip NAME: why"), the test's output in
# $SROCE_RESULTS/NAME.log, and $SROCE_RESULTS/done at the end. The same
# lines go to stdout, which run.sh streams from the console.
set -uo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=${SROCE_RESULTS:?SROCE_RESULTS must name the results directory}
default_timeout=${SROCE_TEST_TIMEOUT:-120}
# The tests: the single-VM ones, or a cluster's (cluster-node.sh sets it).
tests_dir=${SROCE_TESTS_DIR:-$here/tests}
mkdir -p "$results"
: >"$results/results"
rm -f "$results/done" "$results/current"

# shellcheck source=vm-common.sh
. "$here/vm-common.sh"

# peers: a cluster's other nodes (none in a single VM).
peers() {
	local n
	for ((n = 1; n < SROCE_CLUSTER_NODES; n++)); do echo "$n"; done
}

run_one() {
	local t=$1 name tmo token log rc status reason kbad cl p
	name=$(basename "$t" .sh)
	log=$results/$name.log
	# Anywhere in the header comment (the lines before the first that is
	# not a comment), however long it is.
	tmo=$(awk '!/^#/ { exit } /^# timeout: *[0-9]+/ { sub(/^# timeout: */, ""); print $1 + 0; exit }' "$t")
	tmo=$((${tmo:-$default_timeout} * ${SROCE_TIMEOUT_SCALE:-1}))
	token="sroce-selftest: begin $name $$.$RANDOM"
	echo "$token" >/dev/kmsg 2>/dev/null || true
	for p in $(peers); do on_node "$p" "echo '$token' >/dev/kmsg" >/dev/null 2>&1; done
	echo "$name" >"$results/current"
	local t0=$SECONDS
	# The test's scratch files (server logs, ...) come out with the results.
	local ttmp=$results/$name.d
	mkdir -p "$ttmp" 2>/dev/null || {
		ttmp=$scratch/$name
		mkdir -p "$ttmp"
	}

	# timeout puts the test in its own process group; anything the test
	# left running in that group is killed afterwards.
	(cd "$ttmp" && TEST_NAME=$name TEST_TMP=$ttmp exec timeout -k 10 "$tmo" bash "$t") >"$log" 2>&1 </dev/null &
	local pid=$!
	wait "$pid"
	rc=$?
	kill -9 -- "-$pid" 2>/dev/null || true

	(
		echo "--- cleanup after the test"
		reset_cluster_node
		local r=$?
		cleanup_between
		local c=$?
		((r == 0)) || c=1
		for p in $(peers); do
			echo "--- cleanup on node $p"
			on_node "$p" "reset_cluster_node; r=\$?; cleanup_between && exit \$r" || {
				echo "cleanup on node $p failed (status $?: a module in use, or no answer)"
				c=1
			}
		done
		exit $c
	) >>"$log" 2>&1
	cl=$?
	echo "sroce-selftest: end $name" >/dev/kmsg 2>/dev/null || true
	kbad=$(klog_since "$token" | grep -v 'sroce-selftest:' | grep -E "$bad_klog" || true)
	local pk st
	for p in $(peers); do
		pk=$(on_node "$p" "dmesg | grep -qF -- '$token' || { echo 'no marker in its log'; exit 3; }
			klog_since '$token' | grep -v 'sroce-selftest:' | grep -E \"\$bad_klog\"" 2>&1)
		st=$?
		# grep's 1: nothing bad; anything but 0 and 1: the check did not run.
		((st == 1)) && continue
		((st == 0)) || pk="kernel log not checked (status $st): $pk"
		kbad+=${kbad:+$'\n'}$(sed "s/^/node $p: /" <<<"$pk")
	done
	case $rc in
	0) status=ok reason= ;;
	4)
		status=skip
		reason=$(sed -n 's/^SKIP: //p' "$log" | tail -n1)
		;;
	124 | 137) status=FAIL reason="timed out after ${tmo}s" ;;
	*)
		status=FAIL
		reason=$(grep -E '^FAIL: ' "$log" | tail -n1 | sed 's/^FAIL: //')
		reason=${reason:-exit status $rc}
		;;
	esac
	if ((cl != 0)) && [[ $status != FAIL ]]; then
		status=FAIL reason="module still in use after the test (leaked reference?)"
		((SROCE_CLUSTER_NODES > 1)) && reason="cleanup failed: a module still in use (leaked reference?) or a node that did not answer"
	fi
	if [[ -n $kbad ]]; then
		[[ $status == FAIL ]] && reason="$reason; kernel log problems" || reason="kernel log problems"
		status=FAIL
		{
			echo "--- kernel log during the test:"
			klog_since "$token"
		} >>"$log"
	fi

	local line="$status $name"
	[[ -z $reason ]] || line+=": $reason"
	echo "$line" >>"$results/results"
	say "$line ($((SECONDS - t0))s)"
	# Notes (e.g. "note: rxe differs: ...") are worth seeing on the console.
	grep -E '^note: ' "$log" | sed "s/^/  [$name] /"
	if [[ $status == FAIL ]]; then
		if [[ -n $kbad ]]; then
			say "  [$name] kernel log:"
			printf '%s\n' "$kbad" | head -n 40 | sed "s/^/  [$name] | /"
		fi
		if (($(grep -cv '^FAIL: ' "$log") > 1)); then
			say "  [$name] last lines of $name.log:"
			grep -v -- '^--- cleanup' "$log" | tail -n 25 | sed "s/^/  [$name] | /"
		fi
	fi
	rm -f "$results/current"
}

main() {
	setup_vm
	say "sroce selftests: kernel $(uname -r), provider ${SROCE_TESTS_TYPE:-${LINK_TYPE:-sroce}}, $(nproc) cpus, rdma $(rdma system show 2>/dev/null | tr '\n' ' ')"
	local boot_bad
	boot_bad=$(dmesg 2>/dev/null | grep -E "$bad_klog" || true)
	if [[ -n $boot_bad ]]; then
		say "note: kernel log already had problems at boot:"
		printf '%s\n' "$boot_bad" | head -n 20 | sed 's/^/  | /'
	fi

	local t name g want
	for t in "$tests_dir"/*.sh; do
		[[ -e $t ]] || continue
		name=$(basename "$t" .sh)
		if (($# > 0)); then
			want=0
			for g in "$@"; do
				# shellcheck disable=SC2053 # glob match on purpose
				[[ $name == $g || $name.sh == $g ]] && want=1
			done
			((want)) || continue
		fi
		run_one "$t"
	done
	date +%s >"$results/done"
	sync
	if [[ ${SROCE_VM_REBOOT:-0} == 1 && $(cat /proc/sys/kernel/hostname) == virtme* ]]; then
		# The test kernel has no ACPI, so virtme-ng-init's power-off only
		# halts and QEMU would hang; a sysrq reboot makes it exit (-no-reboot).
		say "sroce selftests: done, rebooting the VM"
		sleep 1
		echo b >/proc/sysrq-trigger
	fi
}

main "$@"
