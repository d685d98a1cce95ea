#!/bin/bash
# The benchmark, run inside the VM by `run.sh --bench`: the same perftest
# matrix on the kernel's rxe and on sroce, each between the two hosts h1 and
# h2, in this one VM run; prints a table of sroce/rxe ratios. A benchmark,
# not a test: it asserts nothing and reports "n/a" where a provider cannot
# run a case. Under TCG absolute figures mean little; compare ratios.
set -uo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

echo "sroce bench: $(uname -r), $(nproc) CPUs"
ITERS=${SROCE_BENCH_ITERS:-100}
# tool:sizes; bandwidth tools report MB/s (column 4), latency tools usec
# (t_avg, column 6).
MATRIX=(
	"ib_write_bw:64 4096 65536 1048576"
	"ib_read_bw:64 4096 65536 1048576"
	"ib_send_bw:64 4096 65536 1048576"
	"ib_atomic_bw:8"
	"ib_write_lat:8 4096"
	"ib_read_lat:8 4096"
	"ib_send_lat:8 4096"
	"ib_atomic_lat:8"
	"ib_send_bw -c UD:64 1024"
)

# measure DEV1 DEV2 G1 G2 TOOL... SIZE: one server/client run; prints the
# figure or n/a.
measure() {
	local d1=$1 d2=$2 g1=$3 g2=$4 size=${*: -1} col
	local -a tool=("${@:5:$#-5}")
	[[ ${tool[0]} == *_lat ]] && col=6 || col=4
	in_h2 timeout 60 "${tool[@]}" -d "$d2" -x "$g2" -s "$size" -n "$ITERS" -F >"$TEST_TMP/srv" 2>&1 &
	local srv=$!
	local t=0
	until in_h2 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
	in_h1 timeout 60 "${tool[@]}" -d "$d1" -x "$g1" -s "$size" -n "$ITERS" -F 10.77.1.2 >"$TEST_TMP/cli" 2>&1
	local rc=$?
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	if ((rc != 0)); then
		echo n/a
		return
	fi
	awk -v s="$size" -v c="$col" '$1 == s && NF >= c { v = $c } END { print (v == "" ? "n/a" : v) }' "$TEST_TMP/cli"
}

# run_provider TYPE: fills RESULT[case] for TYPE (rxe or sroce).
declare -A RESULT
run_provider() {
	local type=$1 d1 d2 g1 g2 entry tool sizes size
	d1=${type}1 d2=${type}2
	if [[ $type == rxe ]]; then load_rxe; else load_sroce; fi
	two_hosts
	add_link h1 "$d1" v1 "$type"
	add_link h2 "$d2" v2 "$type"
	wait_port_active "$d1"
	wait_port_active "$d2"
	g1=$(gid_index "$d1" 10.77.1.1)
	g2=$(gid_index "$d2" 10.77.1.2)
	for entry in "${MATRIX[@]}"; do
		tool=${entry%%:*} sizes=${entry#*:}
		for size in $sizes; do
			# shellcheck disable=SC2086 # the tool string carries options
			RESULT["$tool|$size|$type"]=$(measure "$d1" "$d2" "$g1" "$g2" $tool "$size")
		done
	done
	rdma link delete "$d1"
	rdma link delete "$d2"
	if [[ $type == rxe ]]; then unload_rxe; else unload_sroce; fi
	_del_hosts
}

run_provider rxe
run_provider sroce

printf '\n%-18s %8s %14s %14s %8s\n' test size rxe sroce sroce/rxe
for entry in "${MATRIX[@]}"; do
	tool=${entry%%:*} sizes=${entry#*:}
	for size in $sizes; do
		r=${RESULT["$tool|$size|rxe"]} s=${RESULT["$tool|$size|sroce"]}
		ratio=$(awk -v r="$r" -v s="$s" 'BEGIN { if (r + 0 > 0 && s + 0 > 0) printf "%.2f", s / r; else print "n/a" }')
		printf '%-18s %8s %14s %14s %8s\n' "$tool" "$size" "$r" "$s" "$ratio"
	done
done
echo "(bandwidth: MB/s average; latency: t_avg usec — for latency a ratio below 1 is better)"
touch "$SROCE_RESULTS/bench-ok"
[[ ${SROCE_VM_REBOOT:-0} == 1 ]] && { sync; echo b >/proc/sysrq-trigger; }
