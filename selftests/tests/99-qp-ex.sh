#!/bin/bash
# The extended QP API (ibv_create_qp_ex, ibv_wr_start/ibv_wr_*/ibv_wr_complete)
# through stock rdma-core: every operation sroce carries on RC (SEND, SEND
# with immediate, WRITE, WRITE with immediate, READ, both atomics, SGE
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

# verbs_qpex ARGS...: the program (in the initial namespace, which sees
# both devices); all its checks must pass.
verbs_qpex() {
	local out rc=0
	out=$(timeout $((120 * SCALE)) "$SROCE_BIN/verbs_qpex" "$@" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -v '^ok' || true
	((rc == 0)) || fail "verbs_qpex $* exited $rc: $(grep -c '^FAIL' <<<"$out") checks failed"
	assert_contains "$out" "all checks passed" "verbs_qpex $*"
	log "verbs_qpex $*: $(grep -c '^ok' <<<"$out") checks passed"
}

verbs_qpex "$DEV1" "$G1" "$DEV2" "$G2"
verbs_qpex "$DEV2" "$G2" "$DEV1" "$G1"
if [[ $LINK_TYPE == sroce ]]; then
	ll=$(gid_table "$DEV1" | awk '$2 ~ /^fe80:/ && $3 == "RoCE_v2" {print $1; exit}')
	[[ -n $ll ]] || fail "no link-local RoCE v2 GID on $DEV1"
	verbs_qpex "$DEV1" "$ll" "$DEV1" "$ll"
fi
