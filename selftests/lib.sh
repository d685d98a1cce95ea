# Helpers for sroce's VM selftests. Source it from a test; do not run it.
# Runs inside the test VM as root (see vm-main.sh), one bash per test.
# shellcheck shell=bash
#
# Environment (set by run.sh / vm-main.sh):
#   SROCE_KO          path of sroce.ko
#   RXE_KO            path of the kernel tree's rdma_rxe.ko
#   SROCE_TESTS_TYPE  "sroce" (default) or "rxe": which provider the generic
#                     tests drive. LINK_TYPE may be set directly instead.
#   TEST_TMP          a scratch directory for this test (made here if unset)
#
# RDMA and network namespaces: the rdma subsystem stays in its default
# "shared" netns mode (`rdma system` -> "netns shared"). An rdma device
# created on a netdev that lives in h1 is then visible from every namespace,
# so tools select it by name (-d sroce1) and by GID index (-g / -x). We do
# not use "exclusive" mode: that is not what users run, and it would need
# `rdma dev set DEV netns NS` after every link add. Two things follow from
# shared mode, and the helpers respect them:
#   - `rdma link add` resolves the netdev in the caller's namespace, so it
#     must run inside the netdev's namespace (add_link does `ip netns exec`);
#   - `rdma link show` prints "netdev v1" only when run in v1's namespace.

set -euo pipefail
# A command that fails outside a condition ends the test (set -e): say
# which, so such an exit is never silent.
trap '_err_rc=$? _err_src=${BASH_SOURCE[0]:-script}; printf "# command failed (status %s) at %s:%s: %s\n" "$_err_rc" "${_err_src##*/}" "$LINENO" "$BASH_COMMAND"' ERR

SELFTESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SROCE_KO=${SROCE_KO:-$(cd "$SELFTESTS_DIR/.." && pwd)/sroce.ko}
RXE_KO=${RXE_KO:-}
LINK_TYPE=${LINK_TYPE:-${SROCE_TESTS_TYPE:-sroce}}
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
if [[ -z ${TEST_TMP:-} ]]; then
	TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sroce-test.XXXXXX")
fi
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

case $LINK_TYPE in
sroce)
	MOD_KO=$SROCE_KO
	MOD_NAME=sroce
	;;
rxe)
	MOD_KO=$RXE_KO
	MOD_NAME=rdma_rxe
	;;
*)
	echo "FAIL: unknown LINK_TYPE '$LINK_TYPE' (sroce or rxe)" >&2
	exit 1
	;;
esac
# The devices the generic tests create: DEV1 on v1 (in h1), DEV2 on v2 (h2).
# shellcheck disable=SC2034 # used by the tests
DEV1=${LINK_TYPE}1
# shellcheck disable=SC2034
DEV2=${LINK_TYPE}2
# TCP port ibv_*_pingpong and perftest use for their out-of-band exchange.
OOB_PORT=18515
# How much slower than usual this kernel runs (a debug kernel: about 4);
# every wait in these helpers is multiplied by it, as is each test's limit.
SCALE=${SROCE_TIMEOUT_SCALE:-1}
# RC transport timeout (the 4.096 us * 2^N exponent) of the test programs
# and of perftest and rdma-core's ibv_*_pingpong in run_pair: the tools'
# usual 14 (67 ms), times SCALE on a slow kernel, where sending one
# 64-packet message can take longer than 67 ms and every try would time
# out before its ACK.
QP_TIMEOUT_EXP=14
for ((_s = SCALE; _s > 1; _s = (_s + 1) / 2)); do QP_TIMEOUT_EXP=$((QP_TIMEOUT_EXP + 1)); done
if ((SCALE > 1)); then export SROCE_QP_TIMEOUT=${SROCE_QP_TIMEOUT:-$QP_TIMEOUT_EXP}; fi

# with_qp_timeout ARRAY-NAME: on a slow kernel, give a perftest command in
# the named array the scaled transport timeout (unless it sets one), and an
# rdma-core example program (ibv_*_pingpong, whose timeout is fixed) the
# preloaded shim that raises it to SROCE_QP_TIMEOUT.
with_qp_timeout() {
	local -n cmd=$1
	((SCALE > 1)) || return 0
	if [[ " ${cmd[*]} " =~ [\ /]ibv_[a-z]+_pingpong\  ]]; then
		cmd=(env "LD_PRELOAD=$SROCE_BIN/qp_timeout.so" "${cmd[@]}")
		return 0
	fi
	# The tool may come after a wrapper (taskset -c N).
	[[ " ${cmd[*]} " =~ [\ /]ib_(write|read|send|atomic)_(bw|lat)\  ]] || return 0
	[[ " ${cmd[*]} " == *" -u "* ]] && return 0
	cmd+=(-u "$QP_TIMEOUT_EXP")
}

# ---------------------------------------------------------------- output

log() { printf '# %s\n' "$*"; }

# fail MESSAGE: print where it happened and end the test (exit 1).
fail() {
	local i where='?'
	# Report the innermost caller outside this file.
	for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
		if [[ ${BASH_SOURCE[i]} != */lib.sh ]]; then
			where="${BASH_SOURCE[i]##*/}:${BASH_LINENO[i - 1]}"
			break
		fi
	done
	printf 'FAIL: %s (%s)\n' "$*" "$where" >&2
	exit 1
}

# skip REASON: end the test as skipped (exit 4).
skip() {
	printf 'SKIP: %s\n' "$*"
	exit 4
}

# note TEXT: a remark that ends up in the test's log (and, under rxe
# validation, in the console via vm-main's "note:" scan).
note() { printf 'note: %s\n' "$*"; }

# ------------------------------------------------------------ assertions

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
	[[ $1 == "$2" ]] || fail "${3:-value}: expected '$1', got '$2'"
}

# assert_ne UNEXPECTED ACTUAL [WHAT]
assert_ne() {
	[[ $1 != "$2" ]] || fail "${3:-value}: must not be '$1'"
}

# assert_contains HAYSTACK NEEDLE [WHAT] (fixed string)
assert_contains() {
	if [[ $1 != *"$2"* ]]; then
		printf '%s\n' "--- output was:" "$1" "---" >&2
		fail "${3:-output} does not contain '$2'"
	fi
}

# assert_not_contains HAYSTACK NEEDLE [WHAT]
assert_not_contains() {
	if [[ $1 == *"$2"* ]]; then
		printf '%s\n' "--- output was:" "$1" "---" >&2
		fail "${3:-output} contains '$2'"
	fi
}

# assert_match HAYSTACK ERE [WHAT]
assert_match() {
	if ! grep -Eq -- "$2" <<<"$1"; then
		printf '%s\n' "--- output was:" "$1" "---" >&2
		fail "${3:-output} does not match /$2/"
	fi
}

# assert_ok CMD...: CMD must succeed; its output goes to the log.
assert_ok() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[[ -z $out ]] || printf '%s\n' "$out"
	((rc == 0)) || fail "'$*' failed with status $rc"
}

# assert_fails_with ERE CMD...: CMD must exit non-zero and its combined
# output must match ERE (case-insensitive; "" accepts any message). E.g.
#   assert_fails_with 'No such device' in_h1 rdma link add x type sroce netdev nosuch
# The message is kept in $LAST_ERR for further checks.
LAST_ERR=
assert_fails_with() {
	local want=$1 rc=0
	shift
	LAST_ERR=$("$@" 2>&1) || rc=$?
	printf '# %s -> status %d: %s\n' "$*" "$rc" "$LAST_ERR"
	((rc != 0)) || fail "'$*' succeeded, expected failure ($want)"
	if [[ -n $want ]] && ! grep -Eqi -- "$want" <<<"$LAST_ERR"; then
		fail "'$*' failed as expected but said '$LAST_ERR', expected /$want/"
	fi
}

# sroce_only WHAT CMD...: run a check that only sroce is held to. Under
# LINK_TYPE=sroce a failing CMD fails the test; under any other provider it
# is reported as "note: rxe differs: WHAT" and the test goes on. CMD runs
# in a subshell, so an assertion inside it ends only the subshell.
sroce_only() {
	local what=$1 rc
	shift
	set +e
	(set -e; "$@")
	rc=$?
	set -e
	((rc == 0)) && return 0
	[[ $LINK_TYPE == sroce ]] && fail "$what"
	note "$LINK_TYPE differs: $what"
	return 0
}

# retry SECONDS CMD...: run CMD until it succeeds, polling 5 times a second.
retry() {
	local deadline=$((SECONDS + $1 * SCALE))
	shift
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# ------------------------------------------------------------- cleanup

# on_exit CMD: run CMD (a string, eval'ed) when the test exits, in reverse
# order of registration, whatever the exit status.
_CLEANUPS=()
on_exit() { _CLEANUPS+=("$1"); }
_run_cleanups() {
	local rc=$? i
	set +e
	for ((i = ${#_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${_CLEANUPS[i]}" >/dev/null 2>&1
	done
	exit "$rc"
}
trap _run_cleanups EXIT

# Background processes started with bg_in, killed at exit.
_BG_PIDS=()
_kill_bg() {
	local p
	for p in "${_BG_PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	for p in "${_BG_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}
on_exit _kill_bg

# ------------------------------------------------------------ namespaces

in_h1() { ip netns exec h1 "$@"; }
in_h2() { ip netns exec h2 "$@"; }
in_ns() {
	local ns=$1
	shift
	if [[ -z $ns || $ns == - ]]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

_del_hosts() {
	# rdma devices first: deleting the netns also unregisters them, but
	# asynchronously; deleting the links explicitly keeps the order known.
	del_all_links
	ip netns del h1 2>/dev/null || true
	ip netns del h2 2>/dev/null || true
}

# two_hosts: namespaces h1 and h2 joined by veth v1 (h1) <-> v2 (h2):
#   v1 10.77.1.1/24 fd77:1::1/64    v2 10.77.1.2/24 fd77:1::2/64
two_hosts() {
	ip netns add h1
	ip netns add h2
	on_exit _del_hosts
	ip link add v1 netns h1 type veth peer name v2 netns h2
	local ns n
	for n in 1 2; do
		ns=h$n
		in_ns "$ns" ip link set lo up
		in_ns "$ns" ip addr add "10.77.1.$n/24" dev "v$n"
		in_ns "$ns" ip -6 addr add "fd77:1::$n/64" dev "v$n" nodad
		in_ns "$ns" ip link set "v$n" up
	done
	retry 10 in_h1 ip -br link show v1 up || true
}

# second_path: another veth pair w1 (h1, 10.77.2.1/24 fd77:2::1/64) <->
# w2 (h2, 10.77.2.2/24 fd77:2::2/64), for multipath tests. Needs two_hosts.
second_path() {
	ip link add w1 netns h1 type veth peer name w2 netns h2
	local n
	for n in 1 2; do
		in_ns "h$n" ip addr add "10.77.2.$n/24" dev "w$n"
		in_ns "h$n" ip -6 addr add "fd77:2::$n/64" dev "w$n" nodad
		in_ns "h$n" ip link set "w$n" up
	done
}

# multipath_hosts: two_hosts + second_path, plus a service address
# 10.77.9.N/32 on vN in hN, reached from the other host over a two-link
# multipath route (via v and via w) hashed on the 5-tuple (L4 policy), so
# flows with different UDP source ports may take different links.
multipath_hosts() {
	two_hosts
	second_path
	local n m k
	for n in 1 2; do
		m=$((3 - n))
		in_ns "h$n" ip addr add "10.77.9.$n/32" dev "v$n"
		in_ns "h$n" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
		for k in all default "v$n" "w$n"; do
			in_ns "h$n" sysctl -qw "net.ipv4.conf.$k.rp_filter=0"
		done
		in_ns "h$n" ip route add "10.77.9.$m/32" \
			nexthop via "10.77.1.$m" dev "v$n" nexthop via "10.77.2.$m" dev "w$n"
	done
}

# ping_ok NS ADDR: one ping from NS to ADDR (iputils ping or busybox's).
ping_ok() {
	local ns=$1 addr=$2 ping=(ping)
	command -v ping >/dev/null || ping=(busybox ping)
	[[ $addr == *:* && ${ping[0]} == busybox ]] && ping=(busybox ping6)
	in_ns "$ns" "${ping[@]}" -c 1 -W 2 "$addr"
}

# ------------------------------------------------------------ modules

module_loaded() { [[ -d /sys/module/$1 ]]; }

# _insmod NAME KO: insmod KO unless module NAME is loaded already.
_insmod() {
	local name=$1 ko=$2
	module_loaded "$name" && return 0
	[[ -n $ko ]] || fail "no module file given for $name"
	[[ -f $ko ]] || fail "module file $ko does not exist (build it first)"
	insmod "$ko" || fail "insmod $ko failed"
}

# _rmmod NAME: rmmod NAME if loaded; retries briefly since device teardown
# can lag the last close.
_rmmod() {
	local name=$1
	module_loaded "$name" || return 0
	retry 5 rmmod "$name" && return 0
	rmmod "$name"
}

# load_sroce / unload_sroce: the provider under test (sroce.ko, or
# rdma_rxe.ko when LINK_TYPE=rxe). Idempotent.
load_sroce() { _insmod "$MOD_NAME" "$MOD_KO"; }
unload_sroce() { _rmmod "$MOD_NAME"; }
load_rxe() { _insmod rdma_rxe "$RXE_KO"; }
unload_rxe() { _rmmod rdma_rxe; }

# require_module_file: fail (not skip) when the provider's .ko is missing:
# in CI a missing sroce.ko is a real failure.
require_module_file() {
	[[ -n $MOD_KO && -f $MOD_KO ]] ||
		fail "$LINK_TYPE module not found at '${MOD_KO:-<unset>}' (build sroce.ko first, or set SROCE_KO)"
}

# ------------------------------------------------------------ rdma links

# add_link NS DEV NETDEV [TYPE]: `rdma link add` run in the netdev's netns.
add_link() {
	local ns=$1 dev=$2 ndev=$3 type=${4:-$LINK_TYPE}
	in_ns "$ns" rdma link add "$dev" type "$type" netdev "$ndev" ||
		fail "rdma link add $dev type $type netdev $ndev (in $ns) failed"
}

del_link() { rdma link delete "$1"; }

# ib_devs: the names under /sys/class/infiniband, one a line, sorted.
ib_devs() {
	local d
	for d in /sys/class/infiniband/*; do
		[[ -e $d ]] && printf '%s\n' "${d##*/}"
	done | sort
}

# del_all_links: delete every rdma device that was made with `rdma link add`.
del_all_links() {
	local d
	for d in $(ib_devs); do
		rdma link delete "$d" 2>/dev/null || true
	done
}

# port_state DEV: ACTIVE, DOWN, ... from `rdma link show DEV/1`.
port_state() {
	rdma link show "$1/1" 2>/dev/null | sed -n 's/.* state \([A-Z_]*\).*/\1/p'
}

# wait_port_state DEV STATE [SECONDS=15]
wait_port_state() {
	local dev=$1 want=$2 deadline=$((SECONDS + ${3:-15} * SCALE)) st
	while :; do
		st=$(port_state "$dev")
		[[ $st == "$want" ]] && return 0
		((SECONDS < deadline)) || fail "$dev port state is '$st', expected $want"
		sleep 0.2
	done
}

wait_port_active() { wait_port_state "$1" ACTIVE "${2:-15}"; }

# uverbs_dev DEV: the uverbs char device name (uverbs0, ...) of DEV.
uverbs_dev() {
	local d n
	for d in /sys/class/infiniband_verbs/uverbs*; do
		read -r n <"$d/ibdev" 2>/dev/null || continue
		if [[ $n == "$1" ]]; then
			echo "${d##*/}"
			return 0
		fi
	done
	echo "no uverbs device for $1" >&2
	return 1
}

# ------------------------------------------------------------ GIDs

# ip6_expand ADDR: full form, 8 groups of 4 hex digits (fd77:1::1 ->
# fd77:0001:0000:0000:0000:0000:0000:0001).
ip6_expand() {
	local a=$1 head tail g grp=() fill i
	local -a h=() t=()
	if [[ $a == *::* ]]; then
		head=${a%%::*} tail=${a#*::}
	else
		head=$a tail=
	fi
	[[ -z $head ]] || IFS=: read -ra h <<<"$head"
	[[ -z $tail ]] || IFS=: read -ra t <<<"$tail"
	fill=$((8 - ${#h[@]} - ${#t[@]}))
	for g in "${h[@]}"; do grp+=("$(printf '%04x' "$((16#$g))")"); done
	for ((i = 0; i < fill; i++)); do grp+=(0000); done
	for g in "${t[@]}"; do grp+=("$(printf '%04x' "$((16#$g))")"); done
	local IFS=:
	printf '%s\n' "${grp[*]}"
}

# gid_of_ip ADDR: the GID (sysfs spelling) of an IPv4 or IPv6 address; IPv4
# becomes the IPv4-mapped ::ffff:a.b.c.d.
gid_of_ip() {
	local a=$1
	if [[ $a == *:* ]]; then
		ip6_expand "$a"
	else
		local o1 o2 o3 o4
		IFS=. read -r o1 o2 o3 o4 <<<"$a"
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$o1" "$o2" "$o3" "$o4"
	fi
}

# gid_index DEV IPADDR [TYPE="RoCE v2"] [SECONDS=10]: print the index of
# port 1's GID for IPADDR with TYPE, waiting for it to be populated (the
# GID table is filled asynchronously from netdev address events). The table
# has hundreds of slots, so no process per slot (TCG makes forks slow).
gid_index() {
	local dev=$1 want type=${3:-RoCE v2} deadline=$((SECONDS + ${4:-10} * SCALE))
	local base=/sys/class/infiniband/$1/ports/1 f n t
	want=$(gid_of_ip "$2")
	while :; do
		local -a hits=()
		mapfile -t hits < <(grep -lx -- "$want" "$base"/gids/* 2>/dev/null)
		for f in "${hits[@]}"; do
			n=${f##*/}
			read -r t <"$base/gid_attrs/types/$n" 2>/dev/null || continue
			if [[ $t == "$type" ]]; then
				echo "$n"
				return 0
			fi
		done
		((SECONDS < deadline)) || break
		sleep 0.2
	done
	echo "no '$type' GID for $2 ($want) on $dev" >&2
	return 1
}

# gid_table DEV: "INDEX GID TYPE NETDEV" for each populated GID of port 1
# (TYPE with "_" for spaces).
gid_table() {
	local base=/sys/class/infiniband/$1/ports/1 f n g t nd
	for f in "$base"/gids/*; do
		read -r g <"$f" 2>/dev/null || continue
		[[ $g == 0000:0000:0000:0000:0000:0000:0000:0000 ]] && continue
		n=${f##*/}
		read -r t <"$base/gid_attrs/types/$n" 2>/dev/null || continue
		read -r nd <"$base/gid_attrs/ndevs/$n" 2>/dev/null || nd=-
		printf '%s %s %s %s\n' "$n" "$g" "${t// /_}" "$nd"
	done | sort -n
}

# ------------------------------------------------------------ processes

# bg_in NS LOG CMD...: start CMD in NS in the background, output to LOG;
# its pid (CMD's own: ip netns exec execs it) is in $BG_PID, and it is
# killed at exit. (No timeout wrapper: killing that would orphan CMD. The
# test's own timeout covers hangs: vm-main kills the test's process group.)
BG_PID='' BG_LOG='' BG_CMD=''
bg_in() {
	local ns=$1 logf=$2
	shift 2
	# A simple command, not the in_ns function, so that bash execs it in the
	# forked child and $! is the command itself, not a subshell around it.
	if [[ -z $ns || $ns == - ]]; then
		"$@" >"$logf" 2>&1 &
	else
		ip netns exec "$ns" "$@" >"$logf" 2>&1 &
	fi
	BG_PID=$! BG_LOG=$logf BG_CMD="$*"
	_BG_PIDS+=("$BG_PID")
}

# wait_listen NS PORT [SECONDS=20]: wait until a TCP socket listens on PORT
# (the last bg_in process's server). Fails early if that process exits.
wait_listen() {
	local ns=$1 port=$2 deadline=$((SECONDS + ${3:-20} * SCALE)) rc=0
	while :; do
		if in_ns "$ns" ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
			return 0
		fi
		if [[ -n $BG_PID ]] && ! kill -0 "$BG_PID" 2>/dev/null; then
			wait "$BG_PID" 2>/dev/null || rc=$?
			sed 's/^/#   /' "$BG_LOG"
			fail "'$BG_CMD' (in $ns) exited with status $rc before listening on port $port: $(tail -n 3 "$BG_LOG" | tr '\n' ' ')"
		fi
		((SECONDS < deadline)) || fail "nothing listens on TCP port $port in $ns (server: $BG_CMD)"
		sleep 0.2
	done
}

# wait_cm_listen PID [SECONDS=20] [NS]: wait until process PID (the last
# bg_in server, in namespace NS) has an rdma_cm ID listening (listed from
# NS: in exclusive netns mode only there). A connection request that comes
# earlier is rejected by the IB CM with "invalid service ID" (reject reason
# 8, RDMA_CM_EVENT_REJECTED with status 8): a fixed sleep loses that race
# on a slow VM, and so does waiting for any listener of the same program
# (another test's server may still be going away). Fails early if the
# server exits.
wait_cm_listen() {
	local pid=$1 deadline=$((SECONDS + ${2:-20} * SCALE)) ns=${3:--} rc=0
	while :; do
		if in_ns "$ns" rdma resource show cm_id 2>/dev/null |
			awk -v p="pid $pid" '/state LISTEN/ && index($0 " ", " " p " ") { found = 1 } END { exit !found }'; then
			return 0
		fi
		if [[ -n $BG_PID ]] && ! kill -0 "$BG_PID" 2>/dev/null; then
			wait "$BG_PID" 2>/dev/null || rc=$?
			sed 's/^/#   /' "$BG_LOG"
			fail "'$BG_CMD' exited with status $rc before listening: $(tail -n 3 "$BG_LOG" | tr '\n' ' ')"
		fi
		((SECONDS < deadline)) || fail "no rdma_cm listener of process $pid after ${2:-20} s: $(in_ns "$ns" rdma resource show cm_id 2>&1 | tr '\n' ';')"
		sleep 0.2
	done
}

# run_pair SRV_NS "SRV_CMD" CLI_NS "CLI_CMD" [PORT]: the usual rdma-core /
# perftest server+client dance: start the server, wait for its TCP
# listener, run the client (60 s limit); both must succeed. Outputs are in
# $TEST_TMP/server.log and client.log and echoed to the test log. The
# commands are word-split strings.
run_pair() {
	local sns=$1 scmd=$2 cns=$3 ccmd=$4 port=${5:-$OOB_PORT} srv rc=0
	local -a sarr carr
	read -ra sarr <<<"$scmd"
	read -ra carr <<<"$ccmd"
	with_qp_timeout sarr
	with_qp_timeout carr
	bg_in "$sns" "$TEST_TMP/server.log" "${sarr[@]}"
	srv=$BG_PID
	wait_listen "$sns" "$port"
	in_ns "$cns" timeout $((60 * SCALE)) "${carr[@]}" >"$TEST_TMP/client.log" 2>&1 || rc=$?
	_end_pair "$srv" "$rc" "$sns" "$scmd" "$cns" "$ccmd"
}

# dump_rdma_state WHY: logs every RDMA device's non-zero counters and the
# QPs the RDMA core lists (with the driver's attributes), for a failure's
# diagnosis.
dump_rdma_state() {
	local d
	log "RDMA state ($1):"
	for d in /sys/class/infiniband/*; do
		[[ -e $d ]] || continue
		log "  ${d##*/}: $(grep -H . "$d"/ports/1/hw_counters/* 2>/dev/null |
			sed 's|.*/||' | grep -v ':0$' | tr '\n' ' ')"
	done
	rdma -dd resource show qp 2>&1 | grep -v ' lqpn 1 ' | sed 's/^/#     /' || true
}

# PERF_NUM: a number in perftest's result rows. Its latency tools print
# "inf" when their clock calibration fails (r^2 < 0.9, seen under TCG); the
# row with the size and the iteration count is what shows the run finished.
# shellcheck disable=SC2034 # for the tests
PERF_NUM='([0-9.]+|inf|-?nan)'

# assert_perftest_row SIZE ITERS WHAT: the last run_pair's client printed
# perftest's result row for SIZE bytes and ITERS iterations (the run
# finished), with figures after them.
assert_perftest_row() {
	assert_match "$CLIENT_OUT" "^ *$1 +$2 +$PERF_NUM +$PERF_NUM" "$3"
}

# _end_pair SRV_PID CLIENT_RC SRV_NS SRV_CMD CLI_NS CLI_CMD: the common end
# of run_pair and cm_run_pair: give the server a moment to finish after a
# good client, stop it, log both outputs, fail on either's error, set
# CLIENT_OUT.
_end_pair() {
	local srv=$1 rc=$2 sns=$3 scmd=$4 cns=$5 ccmd=$6 src=0
	# A failed client: what the devices counted and where the server's QPs
	# stand, before the server goes.
	((rc == 0)) || dump_rdma_state "client failed ($rc)"
	if ((rc == 0)); then
		local deadline=$((SECONDS + 20 * SCALE))
		while kill -0 "$srv" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
	fi
	kill -9 "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || src=$?
	log "server ($sns): $scmd -> $src"
	sed 's/^/#   /' "$TEST_TMP/server.log"
	log "client ($cns): $ccmd -> $rc"
	sed 's/^/#   /' "$TEST_TMP/client.log"
	if ((src == 0)) && _client_lost_last_ack "$ccmd" "$rc"; then
		log "the client's last ACK was lost after the server finished (ibv_rc_pingpong has no closing handshake): accepted on a lossy wire"
		src=0 rc=0
		# shellcheck disable=SC2034 # for the caller
		CLIENT_OUT="$(grep -E '[0-9]+ iters in' "$TEST_TMP/server.log") (the server's; see above)"
		return 0
	fi
	((rc == 0)) || fail "client '$ccmd' failed with status $rc"
	if ((src != 0)) && _lost_last_ack "$scmd"; then
		log "server's last ACK was lost after the client exited (ibv_rc_pingpong has no closing handshake): accepted on a lossy wire"
		src=0
	fi
	# On a wire the test declares lossy, a server may go on waiting for the
	# client's last packet instead of failing.
	if ((src == 137 && rc == 0)) && [[ ${LOSSY_WIRE:-0} == 1 ]] &&
		! grep -qiE 'fail|error' "$TEST_TMP/server.log"; then
		# On a lossy wire the client's last words (the last ACK, rdma_cm's
		# disconnect request) may be lost after it has checked everything
		# and exited; the server then waits for them.
		log "server still waiting for the client's last packet 20 s after the client succeeded: accepted on a lossy wire"
		src=0
	fi
	((src == 0)) || fail "server '$scmd' failed with status $src"
	# shellcheck disable=SC2034 # for the caller
	CLIENT_OUT=$(cat "$TEST_TMP/client.log")
}

# _lost_last_ack SRV_CMD: whether a failed ibv_rc_pingpong server only lost
# the ACK of its last message. The server sends the last message; the client
# exits once it has it, so if the wire drops the ACK, the server's resends
# find no QP and it ends with RETRY_EXC_ERR on that send (wr_id 2), with
# every message delivered and checked by the client. Only on a wire the test
# declares lossy (LOSSY_WIRE=1): on a clean wire that ACK must arrive.
_lost_last_ack() {
	[[ ${LOSSY_WIRE:-0} == 1 && $1 == ibv_rc_pingpong* ]] || return 1
	grep -q 'Failed status transport retry counter exceeded (12) for wr_id 2' "$TEST_TMP/server.log" &&
		! grep -v -e 'transport retry counter exceeded (12) for wr_id 2' -e 'parse WC failed' \
			-e 'local address' -e 'remote address' "$TEST_TMP/server.log" | grep -qi -e fail -e error
}

# _client_lost_last_ack CLI_CMD CLI_RC: the mirror case: the server
# received and checked (-c) every message and had each of its own
# acknowledged by the client, then exited; the ACK of the client's last
# message was lost, and the client resends it to a QP that is gone. With
# ibv_rc_pingpong's retry_cnt 7 rxe retries forever (the client times out,
# 124), sroce retries seven times, as IBTA counts them, and fails that
# send (wr_id 2) with RETRY_EXC_ERR, its only error. Only on a wire the
# test declares lossy.
_client_lost_last_ack() {
	[[ ${LOSSY_WIRE:-0} == 1 && $1 == ibv_rc_pingpong* ]] || return 1
	grep -qE '^ *[0-9]+ iters in' "$TEST_TMP/server.log" &&
		! grep -qi -e fail -e error "$TEST_TMP/server.log" || return 1
	case $2 in
	124) return 0 ;;
	1)
		grep -q 'Failed status transport retry counter exceeded (12) for wr_id 2' "$TEST_TMP/client.log" &&
			! grep -v -e 'transport retry counter exceeded (12) for wr_id 2' -e 'parse WC failed' \
				-e 'local address' -e 'remote address' "$TEST_TMP/client.log" | grep -qi -e fail -e error
		;;
	*) return 1 ;;
	esac
}

# cm_run_pair SRV_NS "SRV_CMD" CLI_NS "CLI_CMD": an rdma_cm server and
# client (60 s); both must succeed. rdma_cm servers do not listen on TCP:
# the client starts once the server's rdma_cm ID listens. Sets CLIENT_OUT.
# The server runs without a timeout wrapper (see bg_in): killing a wrapper
# left its server running, listening and writing into the next pair's log.
cm_run_pair() {
	local sns=$1 scmd=$2 cns=$3 ccmd=$4 srv rc=0
	local -a sarr carr
	read -ra sarr <<<"$scmd"
	read -ra carr <<<"$ccmd"
	bg_in "$sns" "$TEST_TMP/server.log" "${sarr[@]}"
	srv=$BG_PID
	wait_cm_listen "$srv" 20 "$sns"
	in_ns "$cns" timeout $((60 * SCALE)) "${carr[@]}" >"$TEST_TMP/client.log" 2>&1 || rc=$?
	_end_pair "$srv" "$rc" "$sns" "$scmd" "$cns" "$ccmd"
}

# ------------------------------------------------------------ memory

# sroce_pinned_pages: pages sroce's memory registrations hold pinned, all
# devices together (the module's own count, debugfs; root).
sroce_pinned_pages() { cat /sys/kernel/debug/sroce/pinned_pages; }

# sroce_pins_released WHAT: sroce's pinned pages are 0 (or back to 0 within
# 5 s: a process's registrations go when its device file is released), else
# fails naming WHAT. Exact, unlike the system-wide FOLL_PIN count. rxe has
# no such count: under rxe it is a note, not a check.
sroce_pins_released() {
	if [[ $LINK_TYPE != sroce ]]; then
		echo "note: rxe has no count of its pinned pages: not checked ($1)"
		return 0
	fi
	[[ -r /sys/kernel/debug/sroce/pinned_pages ]] ||
		fail "$1: /sys/kernel/debug/sroce/pinned_pages is not readable"
	retry 5 bash -c '(($(cat /sys/kernel/debug/sroce/pinned_pages) == 0))' ||
		fail "$1: sroce still holds $(sroce_pinned_pages) pages pinned"
}

# pinned_pages: pages currently pinned with FOLL_PIN (pin_user_pages), from
# /proc/vmstat, system-wide: other subsystems' I/O (9p reads) moves it too,
# so tests of sroce's pins use sroce_pinned_pages.
pinned_pages() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null || true
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

# ------------------------------------------------- single-device verbs tests
# one_device_in_h1: sroce loaded (unloaded at exit), the two hosts, and DEV1
# on v1, ACTIVE.
one_device_in_h1() {
	require_module_file
	load_sroce
	on_exit unload_sroce
	two_hosts
	add_link h1 "$DEV1" v1
	wait_port_active "$DEV1"
}

# two_devices: the provider under test (LINK_TYPE) loaded and unloaded at
# exit, the two hosts, and link_devices.
two_devices() {
	require_module_file
	load_sroce
	on_exit unload_sroce
	two_hosts
	link_devices 10.77.1.1 10.77.1.2
}

# link_devices [ADDR1 ADDR2]: DEV1 on v1 in h1 and DEV2 on v2 in h2, both
# ACTIVE; sets G1 and G2 to their RoCEv2 GID indexes for ADDR1 and ADDR2
# (default 10.77.1.1 and 10.77.1.2).
link_devices() {
	add_link h1 "$DEV1" v1
	add_link h2 "$DEV2" v2
	wait_port_active "$DEV1"
	wait_port_active "$DEV2"
	# shellcheck disable=SC2034 # for the caller
	G1=$(gid_index "$DEV1" "${1:-10.77.1.1}")
	# shellcheck disable=SC2034 # for the caller
	G2=$(gid_index "$DEV2" "${2:-10.77.1.2}")
}

# hw_counter DEV NAME: port 1's hardware counter NAME of rdma device DEV.
hw_counter() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }

# pass_threads: the /proc directories of sroce's pass threads (sroce_pass/N).
pass_threads() {
	local f
	for f in /proc/[0-9]*/comm; do
		[[ $(cat "$f" 2>/dev/null) == sroce_pass/* ]] && echo "${f%/comm}"
	done
	return 0
}
# hw_counter_or_0 DEV NAME: the same, 0 if DEV has no such counter (tests
# that also run on rxe, which lacks sroce's counters).
hw_counter_or_0() { hw_counter "$1" "$2" 2>/dev/null || echo 0; }

# checks_pass PROG ARGS...: runs selftests/progs/PROG (in the initial
# namespace, which sees every device and its counters), prints its lines
# but the passing checks, and requires its "all checks passed".
checks_pass() {
	local prog=$1 out rc=0
	shift
	out=$(timeout $((200 * SCALE)) "$SROCE_BIN/$prog" "$@" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -v '^ok' || true
	((rc == 0)) || fail "$prog $* exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
	assert_contains "$out" "all checks passed" "$prog $*"
	log "$prog $*: $(grep -c '^ok' <<<"$out") checks passed"
}

# check_verbs_program PROG ARGS...: runs selftests/progs/PROG in h1 twice
# (a budget, mapping or reference leaked by the first run shows in the
# second), requires its "all checks passed" line each time, and that the
# module's reference count is back where it was; then removes DEV1 and
# unloads the module, which must succeed.
check_verbs_program() {
	local prog=$1 out rc before run
	shift
	before=$(cat "/sys/module/$MOD_NAME/refcnt")
	for run in 1 2; do
		out=$(in_h1 "$SROCE_BIN/$prog" "$@" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		((rc == 0)) || fail "$prog (run $run) exited $rc"
		assert_contains "$out" "all checks passed" "$prog (run $run)"
	done
	assert_eq "$before" "$(cat "/sys/module/$MOD_NAME/refcnt")" \
		"module reference count after $prog exited"
	del_link "$DEV1"
	unload_sroce
	! module_loaded "$MOD_NAME" || fail "module still loaded after $prog"
}

# median_spread: "median spread%" of the numbers on stdin, one per line,
# or "n/a" (the benchmarks' summary of repeated runs).
median_spread() {
	sort -g | awk '{ v[++n] = $1 }
		END {
			if (n == 0) { print "n/a"; exit }
			med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			spread = med > 0 ? 100 * (v[n] - v[1]) / med : 0
			printf "%.4g %.0f\n", med, spread
		}'
}

# perftest_clock_failed FILE: whether the perftest output in FILE holds
# void figures. perftest turns cycles into time with a CPU rate it fits
# against gettimeofday when it reports; a stall of a TCG guest during that
# fit makes it give up ("Correlation coefficient r^2: ... < 0.9") and use
# a rate of 0: a bandwidth of 0, latencies of inf. The benchmarks run such
# a case again.
perftest_clock_failed() { grep -q "Correlation coefficient" "$1"; }
