#!/bin/bash
# The rest of perftest's RC tests between two sroce devices (stock
# rdma-core through the rxe provider): ib_send_bw (also with an SRQ),
# ib_atomic_bw, ib_write_lat, ib_read_lat, ib_send_lat, ib_atomic_lat, at
# sizes from 1 byte to 1 MiB (path MTU 1024, so up to 1024 packets a
# message), few iterations so that it finishes under TCG.
# timeout: 600
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
command -v ib_send_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2

# perf TOOL SIZE ITERS [ARGS...]: server on sroce1 (h1), client on sroce2
# (h2); the client must print the result line for SIZE and ITERS.
perf() {
	local tool=$1 size=$2 iters=$3
	shift 3
	run_pair h1 "$tool -d sroce1 -x $g1 -m 1024 -n $iters -s $size -F $*" \
		h2 "$tool -d sroce2 -x $g2 -m 1024 -n $iters -s $size -F $* 10.77.1.1"
	log "$tool $*: $(grep -E "^ *$size +$iters " <<<"$CLIENT_OUT")"
	assert_perftest_row "$size" "$iters" "$tool -s $size $* result line"
}

for size in 1 4096 65536 1048576; do
	perf ib_send_bw "$size" 5
	perf ib_write_lat "$size" 5
	perf ib_send_lat "$size" 5
done
# READ responses leave in one burst (1024 packets for 1 MiB); the
# requester's receive queue holds 512, and a READ that loses some is
# re-requested from the first missing PSN.
for size in 1 4096 65536 1048576; do
	perf ib_read_lat "$size" 5
done
perf ib_send_bw 4096 20 --use-srq -r 64
perf ib_send_bw 65536 5 --use-srq -r 64
perf ib_atomic_bw 8 50
perf ib_atomic_bw 8 50 -A CMP_AND_SWAP
perf ib_atomic_lat 8 50
perf ib_atomic_lat 8 50 -A CMP_AND_SWAP
