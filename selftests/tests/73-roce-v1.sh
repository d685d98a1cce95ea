#!/bin/bash
# RoCE v1 (IBA annex A16: Ethernet frames, Ethertype 0x8915, a GRH instead
# of IP/UDP) beside RoCEv2, on devices created while the module parameter
# roce_v1 is set:
# - their GID tables list each address as "IB/RoCE v1" and "RoCE v2"
#   (ibv_devinfo -v too); a device created without it lists v2 only;
# - over v1 GIDs (IPv4-mapped, IPv6 and link-local): the pingpongs (RC at
#   three sizes, UC, UD, SRQ; payloads checked), perftest (WRITE, READ,
#   SEND, atomics, SEND latency), verbs_data (every operation, data
#   checked), one device to itself, and rdma_cm's rping with the port's
#   default RoCE mode set to v1 (configfs); a v1 connection keeps one
#   session whatever the device's default;
# - what goes on the wire is RoCE v1: frames captured on the peer's link
#   are Ethertype 0x8915 with a valid GRH and ICRC (checked by
#   selftests/progs/roce_pkt.py's own implementation), and the v1 counters
#   move while the UDP ones stay, and the other way round over v2 GIDs;
# - forged frames are dropped and counted: a destination GID not the
#   device's (rcvd_drop_bad_dgid), a bad ICRC (rcvd_icrc_err), a GRH whose
#   next header is not an IBA transport (rcvd_drop_malformed).
# timeout: 900
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "RoCE v1 is sroce's (rxe speaks RoCEv2 only)"
require_module_file
unload_sroce
insmod "$MOD_KO" roce_v1=1 || fail "insmod $MOD_KO roce_v1=1"
on_exit unload_sroce
two_hosts
link_devices
PKT=$SELFTESTS_DIR/progs/roce_pkt.py
V1_TYPE="IB/RoCE v1"


# ll_gid_index DEV TYPE: the index of DEV's link-local (fe80::) GID of TYPE.
ll_gid_index() {
	local n g t nd
	while read -r n g t nd; do
		[[ $g == fe80:* && $t == "${2// /_}" ]] && { echo "$n"; return 0; }
	done < <(gid_table "$1")
	return 1
}

a1=$(gid_index "$DEV1" 10.77.1.1 "$V1_TYPE") || fail "no RoCE v1 GID for 10.77.1.1"
a2=$(gid_index "$DEV2" 10.77.1.2 "$V1_TYPE") || fail "no RoCE v1 GID for 10.77.1.2"
s1=$(gid_index "$DEV1" fd77:1::1 "$V1_TYPE") || fail "no RoCE v1 GID for fd77:1::1"
s2=$(gid_index "$DEV2" fd77:1::2 "$V1_TYPE") || fail "no RoCE v1 GID for fd77:1::2"
l1=$(ll_gid_index "$DEV1" "$V1_TYPE") || fail "no link-local RoCE v1 GID on $DEV1: $(gid_table "$DEV1")"
log "RoCE v1 GIDs: $DEV1 $a1 (IPv4) $s1 (IPv6) $l1 (link-local), $DEV2 $a2 $s2;" \
	"RoCE v2: $DEV1 $G1, $DEV2 $G2"
log "$DEV1 GID table: $(gid_table "$DEV1" | tr '\n' ';')"
assert_ne "$a1" "$G1" "v1 and v2 GIDs of one address are separate entries"
devinfo=$(ibv_devinfo -v -d "$DEV1")
assert_match "$devinfo" "GID\[ *$a1\]:.*, RoCE v1" "ibv_devinfo -v lists the RoCE v1 GID"
assert_match "$devinfo" "GID\[ *$G1\]:.*, RoCE v2" "ibv_devinfo -v lists the RoCE v2 GID"

# v1_counts DEV: "sent_v1 rcvd_v1 sent_all rcvd_all" of DEV, read until two
# reads agree (a late packet may be counted between the files).
v1_counts() {
	local a b
	b=$(v1_counts_once "$1")
	while a=$b && b=$(v1_counts_once "$1") && [[ $a != "$b" ]]; do sleep 0.1; done
	echo "$b"
}
v1_counts_once() {
	echo "$(hw_counter "$1" sent_roce_v1_pkts) $(hw_counter "$1" rcvd_roce_v1_pkts)" \
		"$(hw_counter "$1" sent_pkts) $(hw_counter "$1" rcvd_pkts)"
}

# --- What v1 puts on the wire: captured on v2 (h2) during an RC ping-pong
# (h1 sends 5 SENDs and ACKs of h2's, some of which may be coalesced).
bg_in h2 "$TEST_TMP/capture.log" python3 "$PKT" v1capture v2 5 --timeout $((120 * SCALE))
cap=$BG_PID
retry 20 grep -q listening "$TEST_TMP/capture.log" || fail "capture did not start"
read -r sv0 rv0 sa0 ra0 < <(v1_counts "$DEV1")
run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $a1 -n 5 -s 1 -m 1024 -c" \
	h2 "ibv_rc_pingpong -d $DEV2 -g $a2 -n 5 -s 1 -m 1024 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "5 iters in" "ibv_rc_pingpong over RoCE v1 (IPv4-mapped GIDs)"
wait "$cap" || fail "fewer than 5 good RoCE v1 frames captured: $(tail -5 "$TEST_TMP/capture.log")"
log "captured: $(grep -c '^v1frame' "$TEST_TMP/capture.log") RoCE v1 frames, e.g. $(grep -m1 '^v1frame' "$TEST_TMP/capture.log")"
assert_not_contains "$(cat "$TEST_TMP/capture.log")" "icrc=BAD" "every captured frame's ICRC"
read -r sv1 rv1 sa1 ra1 < <(v1_counts "$DEV1")
log "$DEV1 sent_roce_v1_pkts +$((sv1 - sv0)) of sent_pkts +$((sa1 - sa0)), rcvd_roce_v1_pkts +$((rv1 - rv0)) of rcvd_pkts +$((ra1 - ra0))"
((sv1 - sv0 >= 10 && rv1 - rv0 >= 10)) || fail "RoCE v1 counters did not move"
# Only the connection's packets moved the device (no CM: the pingpong
# exchanges addresses over TCP), so all of them were v1.
((sv1 - sv0 == sa1 - sa0 && rv1 - rv0 == ra1 - ra0)) ||
	fail "packets other than RoCE v1 during the v1 ping-pong"

# --- Over RoCEv2 GIDs of the same devices: plain RoCEv2, v1 counters still.
read -r sv0 rv0 sa0 ra0 < <(v1_counts "$DEV1")
run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $G1 -n 5 -s 4096 -m 1024 -c" \
	h2 "ibv_rc_pingpong -d $DEV2 -g $G2 -n 5 -s 4096 -m 1024 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "5 iters in" "ibv_rc_pingpong over RoCE v2 beside v1"
read -r sv1 rv1 sa1 ra1 < <(v1_counts "$DEV1")
assert_eq "$sv0 $rv0" "$sv1 $rv1" "RoCE v1 counters during the v2 ping-pong"
((sa1 - sa0 >= 10)) || fail "the v2 ping-pong sent only $((sa1 - sa0)) packets"

# --- The pingpongs over v1 GIDs of each kind.
for size in 4096 100000; do
	run_pair h1 "ibv_rc_pingpong -d $DEV1 -g $s1 -n 5 -s $size -m 1024 -c" \
		h2 "ibv_rc_pingpong -d $DEV2 -g $s2 -n 5 -s $size -m 1024 -c 10.77.1.1"
	assert_match "$CLIENT_OUT" "5 iters in" "ibv_rc_pingpong -s $size over RoCE v1 (IPv6 GIDs)"
done
run_pair h1 "ibv_uc_pingpong -d $DEV1 -g $a1 -n 5 -s 2048 -m 1024 -c" \
	h2 "ibv_uc_pingpong -d $DEV2 -g $a2 -n 5 -s 2048 -m 1024 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "5 iters in" "ibv_uc_pingpong over RoCE v1"
run_pair h1 "ibv_ud_pingpong -d $DEV1 -g $s1 -n 5 -s 1024 -c" \
	h2 "ibv_ud_pingpong -d $DEV2 -g $s2 -n 5 -s 1024 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "5 iters in" "ibv_ud_pingpong over RoCE v1"
run_pair h1 "ibv_srq_pingpong -d $DEV1 -g $a1 -n 5 -s 4096 -m 1024 -c" \
	h2 "ibv_srq_pingpong -d $DEV2 -g $a2 -n 5 -s 4096 -m 1024 -c 10.77.1.1"
assert_match "$CLIENT_OUT" "5 iters in" "ibv_srq_pingpong over RoCE v1"

# --- perftest over v1.
if command -v ib_write_bw >/dev/null; then
	for t in write_bw read_bw send_bw atomic_bw; do
		size=65536
		[[ $t == atomic_bw ]] && size=8
		run_pair h1 "ib_$t -d $DEV1 -x $a1 -n 5 -s $size -F" \
			h2 "ib_$t -d $DEV2 -x $a2 -n 5 -s $size -F 10.77.1.1"
		assert_match "$CLIENT_OUT" "^ *$size +5 +[0-9.]+ +[0-9.]+" "ib_$t result line over RoCE v1"
	done
	run_pair h1 "ib_send_lat -d $DEV1 -x $l1 -n 20 -s 8 -F" \
		h2 "ib_send_lat -d $DEV2 -x $(ll_gid_index "$DEV2" "$V1_TYPE") -n 20 -s 8 -F 10.77.1.1"
	assert_perftest_row 8 20 "ib_send_lat over RoCE v1 (link-local GIDs)"
else
	note "perftest is not installed: not run over RoCE v1"
fi

# --- Every operation, data checked (run in the initial namespace, which
# sees both devices), then one device to itself (its frames looped back).
checks_pass verbs_data "$DEV1" "$a1" "$DEV2" "$a2"
checks_pass verbs_data "$DEV1" "$l1" "$DEV1" "$l1"

# --- A v1 connection keeps one session, whatever the device's default
# (no UDP source port to vary); more is refused while it is connected, and
# its data stays intact (rc_idle checks every WRITE's bytes).
SROCE=$SROCE_BIN/sroce
for d in "$DEV1" "$DEV2"; do assert_ok "$SROCE" dev set "$d" group-size 2; done
bg_in - "$TEST_TMP/idle.log" "$SROCE_BIN/rc_idle" "$DEV1" "$a1" "$DEV2" "$a2" 8
idle=$BG_PID
retry 20 grep -q '^idle qpn' "$TEST_TMP/idle.log" || fail "rc_idle did not connect: $(cat "$TEST_TMP/idle.log")"
qpa=$(awk '/^idle qpn/ { print $3 }' "$TEST_TMP/idle.log")
sessions=$(in_h1 "$SROCE" session show "$DEV1" | grep "^$DEV1 qp $qpa " || true)
log "v1 QP $qpa with the device default of 2 sessions:"$'\n'"$sessions"
assert_eq 1 "$(grep -c . <<<"$sessions")" "sessions of a RoCE v1 QP"
assert_match "$sessions" "session 0 roce-v1 10.77.1.1 -> 10.77.1.2 up " "a RoCE v1 session's line"
json=$(in_h1 "$SROCE" -j session show "$DEV1")
python3 -c 'import json, sys
s = [x for x in json.loads(sys.stdin.read()) if x["qpn"] == int(sys.argv[1])]
assert len(s) == 1 and s[0]["encap"] == "roce-v1" and "sport" not in s[0], s' "$qpa" <<<"$json" ||
	fail "sroce -j session show for the RoCE v1 QP: $json"
assert_fails_with "not supported" "$SROCE" qp set "$DEV1" "$qpa" group-size 2
# The receiving end counts the v1 flow it came on (no UDP port).
qpb=$(awk '/^idle qpn/ { print $4 }' "$TEST_TMP/idle.log")
flows=$(in_h2 "$SROCE" flow show "$DEV2")
log "$DEV2's received flows:"$'\n'"$flows"
assert_match "$flows" "^$DEV2 qp $qpb rx-flow 0 roce-v1 10\.77\.1\.1 -> 10\.77\.1\.2 rx [1-9][0-9]* pkts" \
	"the RoCE v1 connection's received flow"
rc=0
wait "$idle" || rc=$?
((rc == 0)) || fail "rc_idle over RoCE v1 failed ($rc): $(cat "$TEST_TMP/idle.log")"
for d in "$DEV1" "$DEV2"; do assert_ok "$SROCE" dev set "$d" group-size 1; done

# --- rdma_cm over v1: the port's default RoCE mode (configfs).
cm_v1() {
	local cfg=/sys/kernel/config/rdma_cm d
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
		{ note "configfs cannot be mounted: rping over RoCE v1 not run"; return 0; }
	[[ -d $cfg ]] || { note "no rdma_cm configfs: rping over RoCE v1 not run"; return 0; }
	for d in "$DEV1" "$DEV2"; do
		mkdir "$cfg/$d" || fail "mkdir $cfg/$d"
		on_exit "rmdir $cfg/$d"
		echo "$V1_TYPE" >"$cfg/$d/ports/1/default_roce_mode" || fail "set $d's default RoCE mode"
		assert_eq "$V1_TYPE" "$(cat "$cfg/$d/ports/1/default_roce_mode")" "$d default_roce_mode"
	done
	read -r sv0 rv0 sa0 ra0 < <(v1_counts "$DEV1")
	cm_run_pair h1 "rping -s -a 10.77.1.1 -v -V -C 5" h2 "rping -c -a 10.77.1.1 -v -V -C 5"
	assert_match "$CLIENT_OUT" "ping data" "rping over RoCE v1"
	read -r sv1 rv1 sa1 ra1 < <(v1_counts "$DEV1")
	log "rping: $DEV1 sent_roce_v1_pkts +$((sv1 - sv0)) of +$((sa1 - sa0)), rcvd +$((rv1 - rv0)) of +$((ra1 - ra0))"
	((sv1 - sv0 >= 10 && rv1 - rv0 >= 10)) || fail "rping with default_roce_mode v1 did not use RoCE v1"
	for d in "$DEV1" "$DEV2"; do
		echo "RoCE v2" >"$cfg/$d/ports/1/default_roce_mode"
		rmdir "$cfg/$d"
	done
}
cm_v1

# --- Forged frames to DEV1 (from h2, through a raw socket on v2).
mac1=$(in_h1 cat /sys/class/net/v1/address)
gid1=::ffff:10.77.1.1 gid2=::ffff:10.77.1.2
forged() { # COUNTER ARGS...: one forged frame must move DEV1's COUNTER by one
	local name=$1 before after
	shift
	before=$(hw_counter "$DEV1" "$name")
	in_h2 python3 "$PKT" v1send v2 "$mac1" "$@" >/dev/null || fail "v1send $*"
	retry 20 bash -c "(( \$(cat /sys/class/infiniband/$DEV1/ports/1/hw_counters/$name) > $before ))" ||
		fail "$name did not move for a forged frame ($*)"
	after=$(hw_counter "$DEV1" "$name")
	log "forged frame ($*): $name $before -> $after"
}
forged rcvd_roce_v1_pkts "$gid2" "$gid1"
forged rcvd_drop_bad_dgid "$gid2" ::ffff:10.77.1.99
forged rcvd_icrc_err "$gid2" "$gid1" --bad-icrc
forged rcvd_drop_malformed "$gid2" "$gid1" --next-header 0x11

# --- Without the parameter, a device lists RoCE v2 GIDs only.
del_all_links
unload_sroce
load_sroce
add_link h1 "$DEV1" v1
wait_port_active "$DEV1"
gid_index "$DEV1" 10.77.1.1 >/dev/null || fail "no RoCE v2 GID without roce_v1"
assert_not_contains "$(gid_table "$DEV1")" "RoCE_v1" "GID types of a device created without roce_v1"
