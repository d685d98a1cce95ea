#!/bin/bash
# NVMe over RDMA between two VMs with the standard tools: node 1 is the
# target (nvmet + nvmet-rdma, a memory-backed null_blk namespace, set up in
# configfs), node 0 the host, which finds it with `nvme discover` and
# attaches it with `nvme connect` (nvme-cli, transport rdma); fio writes
# the namespace with data verification (verify=crc32c: every block written
# is read back and its checksum checked, a mismatch fails fio), on a clean
# wire and again with netem dropping 1% of the packets both ways. Both
# nodes run sroce; the target's side moves the data with RDMA READ/WRITE
# (force_mr: through fast registration), the host's with SENDs and
# invalidation. Every module is loaded with modprobe (depmod's
# dependencies).
# timeout: 900
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"

command -v nvme >/dev/null || fail "nvme-cli not installed (tools/setup-host.sh installs it)"
command -v fio >/dev/null || fail "fio not installed (tools/setup-host.sh installs it)"
sroce_on 0
sroce_on 1
nqn=nqn.2026-11.org.sroce:cluster-selftest
target=$(ip_of 1)
cfs=/sys/kernel/config/nvmet
hostnqn=nqn.2014-08.org.nvmexpress:uuid:$(cat /proc/sys/kernel/random/uuid)

cleanup_nvme() {
	nvme disconnect -n "$nqn" >/dev/null 2>&1
	on 1 "set +e; rm -f $cfs/ports/1/subsystems/$nqn; rmdir $cfs/ports/1
		echo 0 >$cfs/subsystems/$nqn/namespaces/1/enable
		rmdir $cfs/subsystems/$nqn/namespaces/1 $cfs/subsystems/$nqn
		modprobe -r -d $MODROOT nvmet_rdma nvmet null_blk" >/dev/null 2>&1
	modprobe -r -d "$MODROOT" nvme_rdma nvme_fabrics nvme_core >/dev/null 2>&1
	true
}
on_exit cleanup_nvme

on 1 "modprobe -d $MODROOT null_blk nr_devices=1 gb=1 bs=4096 memory_backed=1 &&
	modprobe -d $MODROOT nvmet-rdma &&
	{ mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } &&
	mkdir $cfs/subsystems/$nqn && echo 1 >$cfs/subsystems/$nqn/attr_allow_any_host &&
	mkdir $cfs/subsystems/$nqn/namespaces/1 &&
	echo /dev/nullb0 >$cfs/subsystems/$nqn/namespaces/1/device_path &&
	echo 1 >$cfs/subsystems/$nqn/namespaces/1/enable &&
	mkdir $cfs/ports/1 && echo rdma >$cfs/ports/1/addr_trtype && echo ipv4 >$cfs/ports/1/addr_adrfam &&
	echo $target >$cfs/ports/1/addr_traddr && echo 4420 >$cfs/ports/1/addr_trsvcid &&
	ln -s $cfs/subsystems/$nqn $cfs/ports/1/subsystems/$nqn" || fail "cannot set up the NVMe target on node 1"
log "node 1: nvmet subsystem $nqn on rdma $target:4420"

modprobe -d "$MODROOT" nvme-rdma || fail "modprobe nvme-rdma"
out=$(nvme discover -t rdma -a "$target" -s 4420 -q "$hostnqn" 2>&1) || fail "nvme discover failed: $out"
printf '%s\n' "$out" | sed 's/^/#   /'
assert_contains "$out" "subnqn:  $nqn" "nvme discover's log page"
assert_match "$out" "trtype: +rdma" "nvme discover's transport"
out=$(nvme connect -t rdma -a "$target" -s 4420 -n "$nqn" -q "$hostnqn" -i 2 2>&1) || fail "nvme connect failed: $out"
log "nvme connect: $out"
dev=
for _ in $(seq $((50 * SCALE))); do
	for c in /sys/class/nvme/nvme*; do
		[[ -e $c/subsysnqn && $(cat "$c/subsysnqn") == "$nqn" ]] || continue
		[[ -b /dev/${c##*/}n1 ]] && dev=/dev/${c##*/}n1
	done
	[[ -n $dev ]] && break
	sleep 0.2
done
[[ -n $dev ]] || fail "no namespace appeared after nvme connect: $(nvme list 2>&1)"
assert_eq rdma "$(cat "/sys/class/nvme/$(basename "$dev" n1)/transport")" "the controller's transport"
nvme list 2>&1 | sed 's/^/#   /'

# fio_verify NAME SIZE: random writes of mixed block sizes, each block
# verified (crc32c) after the write phase; fio fails on any mismatch.
fio_verify() {
	local out rc=0
	out=$(timeout $((300 * SCALE)) fio --name="$1" --filename="$dev" --direct=1 --ioengine=libaio \
		--iodepth=8 --rw=randwrite --bsrange=4k-64k --size="$2" --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_dump=1 --randrepeat=0 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -E 'err=|WRITE:|READ:|verify' | sed 's/^/#   /'
	((rc == 0)) || fail "fio $1 failed ($rc): $(tail -n 5 <<<"$out")"
	assert_match "$out" "err= 0" "fio $1's error count"
	assert_not_contains "$out" "verify failed" "fio $1"
}
pkts0=$(counter_on 1 sroce0 rcvd_pkts)
fio_verify clean 48M
log "fio verified 48 MiB over a clean wire (target received $(($(counter_on 1 sroce0 rcvd_pkts) - pkts0)) packets)"

tc qdisc add dev "$NETDEV" root netem loss 1%
on 1 "tc qdisc add dev $NETDEV root netem loss 1%" || fail "netem on node 1"
retx() { echo $(($(counter_on 0 sroce0 retransmitted_pkts) + $(counter_on 1 sroce0 retransmitted_pkts))); }
retx0=$(retx)
fio_verify lossy 16M
log "fio verified 16 MiB with 1% loss both ways; node 0 netem: $(tc -s qdisc show dev "$NETDEV" | grep -o 'dropped [0-9]*'), retransmitted packets: $(($(retx) - retx0))"
(($(retx) > retx0)) || fail "nothing was retransmitted although netem dropped packets"
tc qdisc del dev "$NETDEV" root
on 1 "tc qdisc del dev $NETDEV root"

nvme disconnect -n "$nqn" | sed 's/^/# /'
[[ ! -b $dev ]] || fail "$dev still there after nvme disconnect"
