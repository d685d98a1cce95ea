#!/bin/bash
# The control interface: generic netlink family "sroce" through the sroce
# tool. Per-device session defaults and the reserved source-port range are
# listed, changed all-or-nothing, validated by the kernel with a message,
# and only changed by CAP_NET_ADMIN.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce's own control interface"
SROCE=$SROCE_BIN/sroce
[[ -x $SROCE ]] || fail "no sroce tool at $SROCE"

# Before the module is loaded the family does not exist.
module_loaded sroce && unload_sroce
assert_fails_with "family 'sroce' not found" "$SROCE" dev show

one_device_in_h1
defaults="$DEV1: ifindex [0-9]+ group-size 1 policy hash ports 61000-65535 reorder-guard on"

# show, as a dump and for one device, from the root namespace and from h1
# (RDMA devices are shared between namespaces).
out=$("$SROCE" dev show)
log "dev show: $out"
assert_match "$out" "^$defaults\$" "dev show lists $DEV1 with the defaults"
ifindex=$(in_h1 cat /sys/class/net/v1/ifindex)
assert_match "$out" "ifindex $ifindex " "ifindex of v1 ($ifindex)"
assert_match "$("$SROCE" dev show "$DEV1")" "^$defaults\$" "dev show $DEV1"
assert_match "$(in_h1 "$SROCE" dev show "$DEV1")" "^$defaults\$" "dev show $DEV1 in h1"

# -j: the same as one JSON array (what python's json module reads back).
json=$("$SROCE" -j dev show "$DEV1")
log "dev show -j: $json"
fields=$(python3 -c 'import json, sys
[d] = json.load(sys.stdin)
print(d["dev"], d["ifindex"], d["group_size"], d["policy"], d["port_min"], d["port_max"], d["reorder_guard"])' <<<"$json") ||
	fail "dev show -j is not one JSON object in an array: $json"
assert_eq "$DEV1 $ifindex 1 hash 61000 65535 True" "$fields" "dev show -j"
assert_eq "[]" "$("$SROCE" -j session show "$DEV1")" "session show -j with no sessions"

# set: each setting, then all at once; show reflects it.
assert_ok "$SROCE" dev set "$DEV1" group-size 4
assert_match "$("$SROCE" dev show "$DEV1")" "group-size 4 policy hash ports 61000-65535 reorder-guard on\$" "group-size 4"
assert_ok "$SROCE" dev set "$DEV1" policy failover
assert_match "$("$SROCE" dev show "$DEV1")" "group-size 4 policy failover ports 61000-65535 reorder-guard on\$" "policy failover"
assert_ok "$SROCE" dev set "$DEV1" ports 62000-62999
assert_match "$("$SROCE" dev show "$DEV1")" "group-size 4 policy failover ports 62000-62999 reorder-guard on\$" "ports"
assert_ok "$SROCE" dev set "$DEV1" group-size 64 policy least-outstanding ports 61000-61000
want="$DEV1: ifindex $ifindex group-size 64 policy least-outstanding ports 61000-61000 reorder-guard off"
assert_ok "$SROCE" dev set "$DEV1" reorder-guard off
assert_eq "$want" "$("$SROCE" dev show "$DEV1")" "all at once, then the reorder guard"
assert_fails_with "reorder-guard 'maybe' is not on or off" "$SROCE" dev set "$DEV1" reorder-guard maybe
assert_ok "$SROCE" dev set "$DEV1" policy round-robin
assert_match "$("$SROCE" dev show)" "policy round-robin " "policy round-robin"

# Bad values fail with a message and change nothing, even when other
# settings in the same request are good.
before=$("$SROCE" dev show "$DEV1")
assert_fails_with 'Numerical result out of range \(ERANGE\): integer out of range' \
	"$SROCE" dev set "$DEV1" group-size 0
assert_fails_with 'out of range' "$SROCE" dev set "$DEV1" policy hash group-size 65
assert_fails_with "unknown policy 'random'" "$SROCE" dev set "$DEV1" policy random
assert_fails_with 'ERANGE.*PORT_MIN <= PORT_MAX' "$SROCE" dev set "$DEV1" group-size 2 ports 63000-62000
assert_fails_with 'ERANGE.*PORT_MIN' "$SROCE" dev set "$DEV1" ports 0-100
assert_fails_with 'ENODEV.*no such sroce device' "$SROCE" dev set nosuch0 group-size 2
assert_fails_with 'ENODEV.*no such sroce device' "$SROCE" dev show nosuch0
assert_fails_with 'nothing to set' "$SROCE" dev set "$DEV1"
assert_eq "$before" "$("$SROCE" dev show "$DEV1")" "nothing changed by the failed requests"

# Unprivileged: show works, set is refused by the generic netlink core.
# (A copy of the tool where nobody can run it.)
pub=$(mktemp -d)
on_exit "rm -rf $pub"
chmod 755 "$pub"
cp "$SROCE" "$pub/sroce"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all "$@"; }
assert_eq "$before" "$(as_nobody "$pub/sroce" dev show "$DEV1")" "unprivileged dev show"
assert_fails_with 'Operation not permitted \(EPERM\)' as_nobody "$pub/sroce" dev set "$DEV1" group-size 2
# Root without CAP_NET_ADMIN, too.
if command -v capsh >/dev/null; then
	assert_fails_with 'EPERM' capsh --drop=cap_net_admin -- -c "$SROCE dev set $DEV1 group-size 2"
fi
assert_eq "$before" "$("$SROCE" dev show "$DEV1")" "nothing changed by unprivileged requests"

# A second device has its own settings; the dump lists both.
add_link h2 "$DEV2" v2
"$SROCE" dev set "$DEV2" group-size 8
out=$("$SROCE" dev show)
log "dev show: $out"
assert_eq 2 "$(grep -c . <<<"$out")" "two devices in the dump"
assert_contains "$out" "$before" "$DEV1 unchanged by $DEV2's change"
assert_match "$out" "$DEV2: ifindex [0-9]+ group-size 8 policy hash ports 61000-65535" "$DEV2"

# A new device starts from the defaults again.
del_link "$DEV1"
add_link h1 "$DEV1" v1
assert_match "$("$SROCE" dev show "$DEV1")" "^$defaults\$" "recreated $DEV1 has the defaults"

# Unloading with the family registered works, and the family goes.
del_all_links
unload_sroce
assert_fails_with "family 'sroce' not found" "$SROCE" dev show
