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
mkdir -p "$results"
: >"$results/results"
rm -f "$results/done" "$results/current"

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

run_one() {
	local t=$1 name tmo token log rc status reason kbad cl
	name=$(basename "$t" .sh)
	log=$results/$name.log
	# Anywhere in the header comment (the lines before the first that is
	# not a comment), however long it is.
	tmo=$(awk '!/^#/ { exit } /^# timeout: *[0-9]+/ { sub(/^# timeout: */, ""); print $1 + 0; exit }' "$t")
	tmo=$((${tmo:-$default_timeout} * ${SROCE_TIMEOUT_SCALE:-1}))
	token="sroce-selftest: begin $name $$.$RANDOM"
	echo "$token" >/dev/kmsg 2>/dev/null || true
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

	{
		echo "--- cleanup after the test"
		cleanup_between
	} >>"$log" 2>&1
	cl=$?
	echo "sroce-selftest: end $name" >/dev/kmsg 2>/dev/null || true
	kbad=$(klog_since "$token" | grep -v 'sroce-selftest:' | grep -E "$bad_klog" || true)

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
	for t in "$here"/tests/*.sh; do
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
