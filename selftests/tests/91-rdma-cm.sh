#!/bin/bash
# Kernel consumers of the verbs: the MAD layer opens QP1 (GSI) on a kernel
# CQ and the communication manager attaches to the device; then rdma_cm
# programs (rping over IPv4 and IPv6, ucmatose, udaddy, rdma_server /
# rdma_client) connect between the two hosts through it, the CM's MADs
# carried by the UD data path on QP1.
# timeout: 420
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's kernel verbs"
require_module_file
load_sroce
on_exit unload_sroce
two_hosts
add_link h1 sroce1 v1
add_link h2 sroce2 v2
wait_port_active sroce1
wait_port_active sroce2

# The MAD layer opens each port (kernel CQ, kernel PD with a DMA MR, GSI
# QP taken to RTS, receives posted); the CM registers its agent on it.
for d in sroce1 sroce2; do
	qps=$(rdma res show qp link "$d/1")
	log "$d: $qps"
	assert_match "$qps" "lqpn 1 type GSI state RTS" "$d: QP1 (GSI) in RTS"
	assert_match "$(rdma res show cq dev "$d")" "cqe [0-9]+ users [0-9]+ poll-ctx [A-Z_]*WORKQUEUE" "$d: the MAD layer's kernel CQ"
done
if dmesg | grep -iE "ib_mad|mad|ib_cm" | grep -iE "couldn't|failed|error"; then
	fail "MAD/CM errors in the kernel log"
fi
ls /dev/infiniband/rdma_cm >/dev/null || fail "no /dev/infiniband/rdma_cm"
log "MAD layer and CM attached to sroce1 and sroce2"

# cm_pair SRV_CMD CLI_CMD: server in h1, client in h2 (see lib.sh).
cm_pair() { cm_run_pair h1 "$1" h2 "$2"; }

cm_pair "rping -s -a 10.77.1.1 -v -V -C 10" "rping -c -a 10.77.1.1 -v -V -C 10"
assert_match "$CLIENT_OUT" "ping data" "rping IPv4"
cm_pair "rping -s -a fd77:1::1 -v -V -C 10" "rping -c -a fd77:1::1 -v -V -C 10"
assert_match "$CLIENT_OUT" "ping data" "rping IPv6"
cm_pair "ucmatose -b 10.77.1.1" "ucmatose -s 10.77.1.1"
assert_match "$CLIENT_OUT" "test complete" "ucmatose"
cm_pair "udaddy -b 10.77.1.1" "udaddy -s 10.77.1.1"
assert_match "$CLIENT_OUT" "test complete" "udaddy"
cm_pair "rdma_server -s 10.77.1.1" "rdma_client -s 10.77.1.1"
assert_match "$CLIENT_OUT" "rdma_client: end 0" "rdma_client"
