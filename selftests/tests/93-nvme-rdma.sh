#!/bin/bash
# A real in-kernel consumer: NVMe over RDMA. The kernel's NVMe target
# (nvmet + nvmet-rdma, a null_blk memory-backed namespace) and the kernel's
# NVMe host (nvme-rdma) talk over sroce, and data written through the host
# is read back intact. Every I/O with data makes the host register its
# buffer with a fast-registration MR (ib_map_mr_sg + IB_WR_REG_MR); the
# target moves the data with RDMA READ/WRITE against that rkey and answers
# with a SEND with invalidate, which must invalidate the host's MR (the
# host checks the invalidated rkey and complains otherwise). The VM boots
# with ib_core.force_mr=1, so the target's own RDMA READ/WRITE also go
# through fast registration and local invalidate (only kernel users of the
# core's rdma_rw API, here nvmet, are affected by it).
#
# Both ends live in the initial network namespace: nvme-rdma and
# nvmet-rdma create their rdma_cm IDs in init_net only. To still have two
# "hosts" on a wire, the target's sroce device sits on veth nv1
# (10.88.0.1) and the host's on its peer nv2 (10.88.0.2, the connection's
# source address), and policy routing sends traffic between the two local
# addresses out through the veth pair instead of looping it back (the local
# table is consulted after rules for locally generated packets).
# timeout: 300
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

[[ $LINK_TYPE == sroce ]] || skip "tests sroce with a kernel consumer"
kdir=${SROCE_KDIR:-}
[[ -n $kdir && -d $kdir ]] || fail "SROCE_KDIR (the kernel tree with the NVMe modules) is not set"
for m in drivers/nvme/host/nvme-core drivers/nvme/host/nvme-fabrics drivers/nvme/host/nvme-rdma \
	drivers/nvme/target/nvmet drivers/nvme/target/nvmet-rdma drivers/block/null_blk/null_blk; do
	[[ -f $kdir/$m.ko ]] || fail "$kdir/$m.ko not built (kconfig/sroce.config enables it)"
done

require_module_file
load_sroce
on_exit unload_sroce

nqn=sroce-selftest
cfs=/sys/kernel/config/nvmet
ctrl=

cleanup_nvme() {
	[[ -n $ctrl && -e /sys/class/nvme/$ctrl/delete_controller ]] &&
		echo 1 >"/sys/class/nvme/$ctrl/delete_controller" 2>/dev/null
	rm -f "$cfs/ports/1/subsystems/$nqn" 2>/dev/null
	rmdir "$cfs/ports/1" 2>/dev/null
	echo 0 >"$cfs/subsystems/$nqn/namespaces/1/enable" 2>/dev/null
	rmdir "$cfs/subsystems/$nqn/namespaces/1" "$cfs/subsystems/$nqn" 2>/dev/null
	local m
	for m in nvme_rdma nvme_fabrics nvme_core nvmet_rdma nvmet null_blk; do
		module_loaded "$m" && rmmod "$m" 2>/dev/null
	done
	ip link del nv1 2>/dev/null
	local p
	for p in 5 6 10 11; do ip rule del pref $p 2>/dev/null; done
	if ! ip rule show pref 0 | grep -q local; then
		ip rule add pref 0 table local 2>/dev/null
		ip rule del pref 100 table local 2>/dev/null
	fi
	true
}
on_exit cleanup_nvme

# Modules, dependencies first (no modules.dep for this tree in the VM).
insmod "$kdir/drivers/block/null_blk/null_blk.ko" nr_devices=1 gb=1 bs=4096 memory_backed=1 ||
	fail "insmod null_blk"
for m in target/nvmet target/nvmet-rdma host/nvme-core host/nvme-fabrics host/nvme-rdma; do
	insmod "$kdir/drivers/nvme/$m.ko" || fail "insmod $m.ko"
done
[[ -b /dev/nullb0 ]] || fail "null_blk made no /dev/nullb0"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
	fail "cannot mount configfs"

# The wire: veth nv1 (target) <-> nv2 (host), both in init_net. Packets
# that arrive on nv1/nv2 are delivered locally (rules 5, 6); all others to
# the other end's address take table 100/101, out through the own veth end
# (rules 10, 11), before the local table (moved from 0 to 100) would loop
# them back. (rdma_cm checks a request's net device with such a lookup.)
ip link add nv1 type veth peer name nv2
ip addr add 10.88.0.1/32 dev nv1
ip addr add 10.88.0.2/32 dev nv2
for n in all nv1 nv2; do
	sysctl -qw "net.ipv4.conf.$n.accept_local=1" "net.ipv4.conf.$n.rp_filter=0"
done
ip link set nv1 up
ip link set nv2 up
ip route add 10.88.0.1/32 dev nv2 src 10.88.0.2 table 100
ip route add 10.88.0.2/32 dev nv1 src 10.88.0.1 table 101
ip rule add pref 5 iif nv1 table local
ip rule add pref 6 iif nv2 table local
ip rule add pref 10 to 10.88.0.1 table 100
ip rule add pref 11 to 10.88.0.2 table 101
ip rule add pref 100 table local
ip rule del pref 0 table local
ip neigh replace 10.88.0.1 lladdr "$(cat /sys/class/net/nv1/address)" dev nv2 nud permanent
ip neigh replace 10.88.0.2 lladdr "$(cat /sys/class/net/nv2/address)" dev nv1 nud permanent
ip route get 10.88.0.1 from 10.88.0.2 | grep -q 'dev nv2' ||
	fail "policy routing does not send 10.88.0.2 -> 10.88.0.1 out of nv2: $(ip route get 10.88.0.1 from 10.88.0.2)"
add_link - srnv1 nv1
add_link - srnv2 nv2
wait_port_active srnv1
wait_port_active srnv2

# Target: subsystem with one namespace on /dev/nullb0, an RDMA port.
mkdir "$cfs/subsystems/$nqn"
echo 1 >"$cfs/subsystems/$nqn/attr_allow_any_host"
mkdir "$cfs/subsystems/$nqn/namespaces/1"
echo /dev/nullb0 >"$cfs/subsystems/$nqn/namespaces/1/device_path"
echo 1 >"$cfs/subsystems/$nqn/namespaces/1/enable"
mkdir "$cfs/ports/1"
echo rdma >"$cfs/ports/1/addr_trtype"
echo ipv4 >"$cfs/ports/1/addr_adrfam"
echo 10.88.0.1 >"$cfs/ports/1/addr_traddr"
echo 4420 >"$cfs/ports/1/addr_trsvcid"
ln -s "$cfs/subsystems/$nqn" "$cfs/ports/1/subsystems/$nqn" || fail "cannot enable the nvmet port"
log "nvmet: subsystem $nqn on rdma 10.88.0.1:4420"

# Host: connect through /dev/nvme-fabrics (what nvme-cli does).
[[ -c /dev/nvme-fabrics ]] || fail "no /dev/nvme-fabrics"
echo "transport=rdma,traddr=10.88.0.1,trsvcid=4420,host_traddr=10.88.0.2,nqn=$nqn,nr_io_queues=2" >/dev/nvme-fabrics ||
	fail "nvme connect over rdma failed: $(dmesg | tail -n 5)"
for _ in $(seq 50); do
	for c in /sys/class/nvme/nvme*; do
		[[ -e $c/subsysnqn && $(cat "$c/subsysnqn") == "$nqn" ]] && ctrl=${c##*/}
	done
	[[ -n $ctrl && -b /dev/${ctrl}n1 ]] && break
	sleep 0.2
done
[[ -n $ctrl && -b /dev/${ctrl}n1 ]] || fail "no NVMe namespace appeared: $(dmesg | tail -n 5)"
dev=/dev/${ctrl}n1
log "host: $ctrl, transport $(cat "/sys/class/nvme/$ctrl/transport"), namespace $dev ($(($(cat "/sys/block/${ctrl}n1/size") / 2048)) MiB)"
for d in srnv1 srnv2; do
	mrs=$(rdma resource show mr dev $d 2>/dev/null | grep -c 'mrn' || true)
	qps=$(rdma resource show qp link $d/1 2>/dev/null | grep lqpn | grep -vc 'lqpn 1 ' || true)
	log "$d while connected: $qps QPs, $mrs MRs"
	# The admin queue and two I/O queues on each side.
	((qps >= 3)) || fail "expected the admin and I/O queues' QPs on $d, got $qps"
done

# Data: direct I/O of several sizes (one page, many pages per request),
# written through the host and read back, compared byte for byte; and the
# target's block device holds the same bytes.
hw() { # COUNTER: summed over both devices
	echo $(($(hw_counter srnv1 "$1") + $(hw_counter srnv2 "$1")))
}
# Bytes sent on a link (not packets: a message's packets may cross it as
# one UDP-segmented datagram).
wire() { cat "/sys/class/net/$1/statistics/tx_bytes"; }
sent0=$(hw sent_pkts) reg0=$(hw fast_reg) linv0=$(hw local_inv) rinv0=$(hw remote_inv)
nv1_0=$(wire nv1) nv2_0=$(wire nv2)
head -c $((24 << 20)) /dev/urandom >"$TEST_TMP/data"
for bs in 4k 64k 512k; do
	dd if="$TEST_TMP/data" of="$dev" bs="$bs" oflag=direct status=none ||
		fail "dd write bs=$bs to $dev failed"
	dd if="$dev" of="$TEST_TMP/back" bs="$bs" iflag=direct count=$(((24 << 20) / $(numfmt --from=iec "${bs^^}"))) status=none ||
		fail "dd read bs=$bs from $dev failed"
	cmp "$TEST_TMP/data" "$TEST_TMP/back" || fail "data read back through NVMe/RDMA (bs=$bs) differs"
	log "bs=$bs: 24 MiB written and read back intact"
	# A different pattern for the next size, so stale data cannot pass.
	head -c $((24 << 20)) /dev/urandom >"$TEST_TMP/data"
done
head -c $((24 << 20)) "$dev" | cmp - <(head -c $((24 << 20)) /dev/nullb0) ||
	fail "the target's null_blk does not hold what the host reads"
sent=$(($(hw sent_pkts) - sent0)) reg=$(($(hw fast_reg) - reg0))
linv=$(($(hw local_inv) - linv0)) rinv=$(($(hw remote_inv) - rinv0))
log "srnv1+srnv2: sent_pkts +$sent, fast_reg +$reg, local_inv +$linv, remote_inv +$rinv"
((sent > 3 * 24 * 1024)) || fail "too few packets for 3 x 2 x 24 MiB: $sent"
w1=$(($(wire nv1) - nv1_0)) w2=$(($(wire nv2) - nv2_0))
log "on the wire: nv1 sent $w1 bytes, nv2 sent $w2"
((w1 > 3 * (12 << 20) && w2 > 3 * (12 << 20))) || fail "the traffic did not cross the veth pair (nv1 +$w1, nv2 +$w2)"
# At least one registration per data I/O of the host (24 MiB in 512 KiB
# I/Os is 48 of them), each answered by a SEND with invalidate; the
# target's registrations (force_mr) are invalidated locally before reuse.
((reg >= 2 * 48)) || fail "fast_reg moved only by $reg"
((rinv >= 48)) || fail "remote_inv moved only by $rinv"
((linv > 0)) || fail "local_inv did not move"
if dmesg | grep -E 'nvme|nvmet' | grep -iE 'bogus|invalidat|error|failed|timeout'; then
	fail "NVMe over RDMA logged errors (above)"
fi

# Disconnect: the controller, its QPs and MRs go away.
echo 1 >"/sys/class/nvme/$ctrl/delete_controller"
ctrl=
data_qps() { rdma resource show qp 2>/dev/null | grep -E 'link srnv[12]/' | grep -vc 'lqpn 1 ' || true; }
for _ in $(seq 50); do
	(($(data_qps) == 0)) && break
	sleep 0.2
done
log "after disconnect: $(data_qps) QPs besides QP1 on srnv1/srnv2"
(($(data_qps) == 0)) || fail "QPs left after the disconnect: $(rdma resource show qp)"
