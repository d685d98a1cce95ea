#!/bin/bash
# The extended QP API (ibv_create_qp_ex, ibv_wr_start/ibv_wr_*/ibv_wr_complete)
# through stock rdma-core: every operation sroce carries on RC (SEND, SEND
# with immediate, WRITE, WRITE with immediate, READ, both atomics, ATOMIC
# WRITE (and one at an unaligned address, refused), SGE
# lists, inline data, a batch with an unsignaled request, an aborted
# batch), UC (SEND with immediate, WRITE) and UD (SEND to an address handle,
# with immediate), byte for byte, by the verbs_qpex program; between two
# devices and, for sroce, one device to itself over its link-local GID.
# Runs for rxe too (SROCE_TESTS_TYPE=rxe), as the reference.
# timeout: 240
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

two_devices
on_exit del_all_links

verbs_qpex() { checks_pass verbs_qpex "$@"; }

verbs_qpex "$DEV1" "$G1" "$DEV2" "$G2"
verbs_qpex "$DEV2" "$G2" "$DEV1" "$G1"
if [[ $LINK_TYPE == sroce ]]; then
	ll=$(gid_table "$DEV1" | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
	[[ -n $ll ]] || fail "no link-local RoCE v2 GID on $DEV1"
	verbs_qpex "$DEV1" "$ll" "$DEV1" "$ll"
fi
