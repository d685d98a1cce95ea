#!/bin/bash
# RDMA WRITE and READ between two sroce devices with perftest (stock
# rdma-core through the rxe provider).
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's data path"
command -v ib_write_bw >/dev/null || skip "perftest is not installed"
two_devices
g1=$G1 g2=$G2

run_pair h1 "ib_write_bw -d sroce1 -x $g1 -n 5 -s 65536 -F" \
	h2 "ib_write_bw -d sroce2 -x $g2 -n 5 -s 65536 -F 10.77.1.1"
log "ib_write_bw client: $(grep -E '^ *65536 ' <<<"$CLIENT_OUT")"
assert_match "$CLIENT_OUT" '^ *65536 +5 +[0-9.]+ +[0-9.]+' "ib_write_bw result line"

run_pair h1 "ib_read_bw -d sroce1 -x $g1 -n 5 -s 65536 -F" \
	h2 "ib_read_bw -d sroce2 -x $g2 -n 5 -s 65536 -F 10.77.1.1"
log "ib_read_bw client: $(grep -E '^ *65536 ' <<<"$CLIENT_OUT")"
assert_match "$CLIENT_OUT" '^ *65536 +5 +[0-9.]+ +[0-9.]+' "ib_read_bw result line"
