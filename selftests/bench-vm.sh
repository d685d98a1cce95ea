#!/bin/bash
# The benchmark, run inside the VM by `run.sh --bench`: the same perftest
# matrix on the kernel's rxe and on sroce, each between the two hosts h1 and
# h2 of this one VM, in rounds that alternate which provider goes first;
# prints per case the median over the rounds, the spread (max-min over the
# median) and the sroce/rxe ratio of the medians. A benchmark, not a test:
# it asserts nothing and reports "n/a" where a provider cannot run a case.
# Under TCG absolute figures mean little; compare ratios.
#
# Environment (run.sh passes every SROCE_BENCH_* variable through):
#   SROCE_BENCH_ROUNDS=N   rounds per provider (default 3)
#   SROCE_BENCH_BYTES=N    bytes a bandwidth case moves (default 8 MiB; the
#                          iterations are that over the size, 20..2000)
#   SROCE_BENCH_LAT_ITERS  iterations of a latency case (default 500)
#   SROCE_BENCH_MAX_ITERS  iterations of a bandwidth case at most (default
#                          2000; more for a profile of small messages, whose
#                          2000 take a fraction of a second)
#   SROCE_BENCH_CASES=ERE  only the cases whose "tool size" matches
#   SROCE_BENCH_KO_B=PATH  also run another build of sroce.ko (e.g. the code
#                          before a change) as a third provider, "sroce_b",
#                          and print sroce/sroce_b ratios: a before/after
#                          comparison measured in the same VM run
#   SROCE_BENCH_PROFILE=1  also sample the whole VM (perf, cpu-clock, call
#                          graphs) during one more run of the profiled cases
#                          (SROCE_BENCH_PROFILE_CASES, an ERE) per provider
#                          and print where the time went, by symbol
set -uo pipefail
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
set +e

echo "sroce bench: $(uname -r), $(nproc) CPUs"
ROUNDS=${SROCE_BENCH_ROUNDS:-3}
BYTES=${SROCE_BENCH_BYTES:-8388608}
LAT_ITERS=${SROCE_BENCH_LAT_ITERS:-500}
MAX_ITERS=${SROCE_BENCH_MAX_ITERS:-2000}
CASES=${SROCE_BENCH_CASES:-.}
PROFILE=${SROCE_BENCH_PROFILE:-0}
KO_B=${SROCE_BENCH_KO_B:-}
PROVIDERS=(rxe sroce)
if [[ -n $KO_B ]]; then
	[[ -f $KO_B ]] || { echo "SROCE_BENCH_KO_B: no file $KO_B"; exit 1; }
	PROVIDERS+=(sroce_b)
fi
PROFILE_CASES=${SROCE_BENCH_PROFILE_CASES:-^(ib_write_bw (64|4096|65536)|ib_write_lat 8)$}
# The functions whose inclusive share the profile lists: a packet's stages
# in both providers (work items, transmit, receive, ICRC, copies, routes,
# skbs, completions) and the idle loop.
PROFILE_STAGES=${SROCE_BENCH_PROFILE_STAGES:-'(process_one_work|rxe_[a-z_]+|sroce[^ ]*(run|send|receive|scatter|gather|post|complete)[^ ]*|ip_local_out|ip6_local_out|__netif_receive_skb|net_rx_action|udp_queue_rcv_skb|ip_route_output_flow|ip6_dst_lookup_flow|crc32_le|__alloc_skb|memcpy|memset|copy_user|__schedule|try_to_wake_up|ib_uverbs_write|ib_uverbs_post_send|pv_native_safe_halt|do_idle)$'}
# tool:sizes. Bandwidth tools report MB/s (column 4) and Mpps (column 5),
# latency tools t_typical, perftest's median (column 5), in usec.
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

is_lat() { [[ $1 == *_lat* ]]; }

iterations() { # TOOL SIZE
	if is_lat "$1"; then
		echo "$LAT_ITERS"
	else
		local n=$((BYTES / $2))
		((n > MAX_ITERS)) && n=$MAX_ITERS
		((n < 20)) && n=20
		echo "$n"
	fi
}

# Busy and kernel (system, irq, softirq) jiffies of the whole VM, both
# hosts included: "busy kernel".
cpu_jiffies() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $4 + $7 + $8; exit }' /proc/stat
}

# measure DEV1 DEV2 G1 G2 PERF_OUT TOOL... SIZE: one server/client run,
# run again (up to twice) if perftest could not tell its clock's rate.
# Prints "FIGURE MPPS BYTES BUSY_JIFFIES KERNEL_JIFFIES", or "n/a".
measure() {
	local out try
	for try in 1 2 3; do
		out=$(measure_once "$@")
		[[ $out == retry ]] || break
	done
	[[ $out == retry ]] && out=n/a
	echo "$out"
}

# measure_once ARGS: measure's one run; "retry" if perftest's figures are
# void (lib.sh perftest_clock_failed).
measure_once() {
	local d1=$1 d2=$2 g1=$3 g2=$4 perf_out=$5 size=${*: -1}
	local -a tool=("${@:6:$#-6}")
	local iters col=4
	local -a perf=()
	iters=$(iterations "${tool[0]}" "$size")
	is_lat "${tool[0]}" && col=5
	in_h2 timeout 70 "${tool[@]}" -d "$d2" -x "$g2" -s "$size" -n "$iters" -F >"$TEST_TMP/srv" 2>&1 &
	local srv=$!
	local t=0
	until in_h2 ss -Hltn "sport = :$OOB_PORT" 2>/dev/null | grep -q . || ((t++ > 50)); do sleep 0.2; done
	# Sampled: the whole VM while the client runs.
	# (No build-id collection afterwards: slow under TCG, not needed for
	# a report made on this machine.)
	[[ -n $perf_out ]] && perf=(perf record --no-buildid --no-buildid-cache -a -g -e cpu-clock -F 499 -o "$perf_out" --)
	# A client still running after 50 s is stuck: the QPs' state then is
	# kept for the failure's log.
	# The sleep runs in the background of the watcher so that killing the
	# watcher ends it at once: bash defers a signal until its foreground
	# child exits, and every case then took 50 s.
	(
		trap 'kill "$nap" 2>/dev/null; exit 0' TERM
		sleep 50 &
		nap=$!
		wait "$nap" && rdma -dd resource show qp >"$TEST_TMP/qps" 2>&1
	) &
	local watch=$!
	local b0 k0 b1 k1
	read -r b0 k0 < <(cpu_jiffies)
	"${perf[@]}" ip netns exec h1 timeout 60 "${tool[@]}" -d "$d1" -x "$g1" -s "$size" -n "$iters" -F 10.77.1.2 \
		>"$TEST_TMP/cli" 2>"$TEST_TMP/cli.err"
	local rc=$?
	read -r b1 k1 < <(cpu_jiffies)
	kill "$watch" 2>/dev/null
	wait "$watch" 2>/dev/null
	cat "$TEST_TMP/cli.err" >>"$TEST_TMP/cli"
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	if ((rc != 0)); then
		# Kept for a look: the failed case's client and server output.
		{
			cat "$TEST_TMP/cli" "$TEST_TMP/srv"
			local d c
			for d in "$d1" "$d2"; do
				for c in /sys/class/infiniband/"$d"/ports/1/hw_counters/*; do
					[[ $(cat "$c") == 0 ]] || echo "$d ${c##*/} $(cat "$c")"
				done
			done
			echo "-- QPs 50 s into the run"
			cat "$TEST_TMP/qps" 2>/dev/null
		} >"$SROCE_RESULTS/failed-${d1%1}-${tool[0]}-$size.log" 2>/dev/null
		echo n/a
		return
	fi
	if perftest_clock_failed "$TEST_TMP/cli"; then
		echo retry
		return
	fi
	awk -v s="$size" -v c="$col" -v it="$iters" -v b=$((b1 - b0)) -v k=$((k1 - k0)) '
		$1 == s && NF >= c { v = $c; m = $5; n = $2 }
		END {
			if (v == "" || v ~ /inf|nan/) { print "n/a"; exit }
			print v, m, s * (n > 0 ? n : it), b, k
		}' "$TEST_TMP/cli"
}

# RESULT[tool|size|provider] holds one line per round; PROFILED lists the
# perf data files.
declare -A RESULT
PROFILED=()

# run_provider TYPE ROUND: one round of the matrix for TYPE (rxe, sroce or
# sroce_b, the other build of sroce.ko); ROUND "profile" runs the profiled
# cases under perf instead.
run_provider() {
	local type=$1 round=$2 d1 d2 g1 g2 entry tool sizes size out link=$1
	d1=${type/_/}1 d2=${type/_/}2
	case $type in
	rxe) load_rxe ;;
	sroce) load_sroce ;;
	sroce_b) _insmod sroce "$KO_B"; link=sroce ;;
	esac
	two_hosts
	add_link h1 "$d1" v1 "$link"
	add_link h2 "$d2" v2 "$link"
	wait_port_active "$d1"
	wait_port_active "$d2"
	g1=$(gid_index "$d1" 10.77.1.1)
	g2=$(gid_index "$d2" 10.77.1.2)
	for entry in "${MATRIX[@]}"; do
		tool=${entry%%:*} sizes=${entry#*:}
		for size in $sizes; do
			[[ "$tool $size" =~ $CASES ]] || continue
			if [[ $round == profile ]]; then
				[[ "$tool $size" =~ $PROFILE_CASES ]] || continue
				# In the guest's own /tmp: perf cannot write its data
				# into the host directory the results go to.
				out=/tmp/perf-$type-${tool// /_}-$size.data
				# shellcheck disable=SC2086 # the tool string carries options
				measure "$d1" "$d2" "$g1" "$g2" "$out" $tool "$size" >/dev/null
				[[ -s $out ]] && PROFILED+=("$out")
				continue
			fi
			# shellcheck disable=SC2086 # the tool string carries options
			RESULT["$tool|$size|$type"]+="$(measure "$d1" "$d2" "$g1" "$g2" "" $tool "$size")"$'\n'
		done
	done
	# The module's symbols leave /proc/kallsyms with it: the reports
	# read this copy.
	[[ $round == profile ]] && cat /proc/kallsyms >"/tmp/kallsyms-$type"
	rdma link delete "$d1"
	rdma link delete "$d2"
	if [[ $type == rxe ]]; then unload_rxe; else _rmmod sroce; fi
	_del_hosts
}

start=$SECONDS
for ((r = 1; r <= ROUNDS; r++)); do
	# Alternate which provider goes first, so a drift of the machine's
	# speed during the run does not favour one of them.
	order=("${PROVIDERS[@]}")
	if ! ((r % 2)); then
		reversed=()
		for ((i = ${#order[@]} - 1; i >= 0; i--)); do reversed+=("${order[i]}"); done
		order=("${reversed[@]}")
	fi
	for type in "${order[@]}"; do
		echo "# round $r/$ROUNDS: $type ($((SECONDS - start)) s)"
		run_provider "$type" "$r"
	done
done

# stats FIELD LINES: median and spread of field FIELD over the rounds'
# lines (n/a rounds left out).
stats() {
	awk -v f="$1" '$1 != "n/a" && NF >= f { print $f }' <<<"$2" | median_spread
}

# cpu_per_gib LINES: medians over the rounds of busy and kernel CPU seconds
# per GiB moved, "busy kernel" (jiffies are 1/USER_HZ = 1/100 s).
cpu_per_gib() {
	local b k
	b=$(awk '$1 != "n/a" && NF >= 5 && $3 > 0 { print $4 / 100 / ($3 / 1073741824) }' <<<"$1" | median_spread)
	k=$(awk '$1 != "n/a" && NF >= 5 && $3 > 0 { print $5 / 100 / ($3 / 1073741824) }' <<<"$1" | median_spread)
	if [[ $b == n/a ]]; then echo "n/a n/a"; else printf '%.1f %.1f\n' "${b%% *}" "${k%% *}"; fi
}

ratio() { awk -v r="$1" -v s="$2" 'BEGIN { if (r + 0 > 0 && s + 0 > 0) printf "%.2f", s / r; else print "n/a" }'; }

echo
echo "medians of $ROUNDS rounds, spread = (max - min) / median; $(nproc) CPUs, $((SECONDS - start)) s"
printf '%-17s %8s %9s %5s %9s %5s %6s | %7s %7s | %7s %7s %7s %7s\n' \
	test size rxe '±%' sroce '±%' ratio 'rxe-Mpps' 'sroce' 'rxe-s/G' 'kern' 'sroce' 'kern'
for entry in "${MATRIX[@]}"; do
	tool=${entry%%:*} sizes=${entry#*:}
	for size in $sizes; do
		[[ "$tool $size" =~ $CASES ]] || continue
		rl=${RESULT["$tool|$size|rxe"]:-} sl=${RESULT["$tool|$size|sroce"]:-}
		read -r rm rs < <(stats 1 "$rl")
		read -r sm ss < <(stats 1 "$sl")
		line=$(printf '%-17s %8s %9s %5s %9s %5s %6s' "$tool" "$size" "$rm" "${rs:-}" "$sm" "${ss:-}" "$(ratio "$rm" "$sm")")
		if ! is_lat "$tool"; then
			read -r rp _ < <(stats 2 "$rl")
			read -r sp _ < <(stats 2 "$sl")
			read -r rb rk < <(cpu_per_gib "$rl")
			read -r sb sk < <(cpu_per_gib "$sl")
			line+=$(printf ' | %7s %7s | %7s %7s %7s %7s' "$rp" "$sp" "$rb" "$rk" "$sb" "$sk")
		fi
		echo "$line"
	done
done
cat <<EOF
(bandwidth: MB/s, perftest's BW average, ratio > 1 is better; latency: usec,
 perftest's t_typical, ratio < 1 is better; Mpps: message rate; s/G: CPU
 seconds of the whole VM, both hosts, per GiB moved, all busy time and the
 kernel's part (system + irq + softirq) — perftest's clients poll their
 CQs, so the busy time includes user-space spinning)
EOF

if [[ -n $KO_B ]]; then
	echo
	echo "sroce against sroce_b ($KO_B), medians of the same rounds"
	printf '%-17s %8s %9s %5s %9s %5s %6s | %7s %7s\n' \
		test size sroce_b '±%' sroce '±%' ratio 'b-kern' 'kern'
	for entry in "${MATRIX[@]}"; do
		tool=${entry%%:*} sizes=${entry#*:}
		for size in $sizes; do
			[[ "$tool $size" =~ $CASES ]] || continue
			bl=${RESULT["$tool|$size|sroce_b"]:-} sl=${RESULT["$tool|$size|sroce"]:-}
			read -r bm bs < <(stats 1 "$bl")
			read -r sm ss < <(stats 1 "$sl")
			line=$(printf '%-17s %8s %9s %5s %9s %5s %6s' "$tool" "$size" "$bm" "${bs:-}" "$sm" "${ss:-}" "$(ratio "$bm" "$sm")")
			if ! is_lat "$tool"; then
				read -r _ bk < <(cpu_per_gib "$bl")
				read -r _ sk < <(cpu_per_gib "$sl")
				line+=$(printf ' | %7s %7s' "$bk" "$sk")
			fi
			echo "$line"
		done
	done
	echo "(ratio: sroce over sroce_b; kern: kernel CPU seconds per GiB)"
fi

if [[ $PROFILE == 1 ]]; then
	for type in rxe sroce; do
		echo "# profile: $type"
		run_provider "$type" profile
	done
	# Module symbols come from the copy of kallsyms taken while the
	# module was loaded (the modules were loaded from paths perf does not
	# search).
	# sroce's Rust symbols are demangled when rustfilt is installed
	# (`cargo install rustfilt`); perf 6.1 reads only the legacy scheme.
	demangle=cat
	for d in "$(command -v rustfilt || true)" "${CARGO_HOME:-$HOME/.cargo}/bin/rustfilt"; do
		[[ -n $d && -x $d ]] && demangle=$d && break
	done
	for f in "${PROFILED[@]}"; do
		type=${f##*/perf-}
		type=${type%%-*}
		echo
		echo "== profile ${f##*/perf-}: share of samples by symbol (all CPUs, self time)"
		perf report -i "$f" --kallsyms="/tmp/kallsyms-$type" --stdio --no-children --sort dso,sym -g none \
			--percent-limit 0.5 2>&1 | grep -v '^#' | grep -v '^$' | "$demangle" | head -n 40 || true
		echo "-- kernel and module symbols by self time"
		perf report -i "$f" --kallsyms="/tmp/kallsyms-$type" --stdio --no-children --sort dso,sym -g none \
			--percent-limit 0.2 2>&1 | grep -F '[k]' | "$demangle" | head -n 50 || true
		echo "-- inclusive (with callees) share of the kernel's stages"
		perf report -i "$f" --kallsyms="/tmp/kallsyms-$type" --stdio --children --sort sym -g none 2>&1 |
			"$demangle" | grep -E "$PROFILE_STAGES" | head -n 40 || true
	done
fi
touch "$SROCE_RESULTS/bench-ok"
[[ ${SROCE_VM_REBOOT:-0} == 1 ]] && { sync; echo b >/proc/sysrq-trigger; }
