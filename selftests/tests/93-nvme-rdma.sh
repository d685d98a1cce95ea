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
# nvmet-rdma create their rdma_cm IDs in init_net only. So this runs over
# one sroce device, the host's connection looping back through the UDP
# stack to the target's, as blktests runs NVMe over rxe.
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

# The link: a veth end in init_net with the target's address.
ip link add nv1 type veth peer name nv2
ip addr add 10.88.0.1/24 dev nv1
ip link set nv1 up
ip link set nv2 up
add_link - srnv1 nv1
wait_port_active srnv1

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
echo "transport=rdma,traddr=10.88.0.1,trsvcid=4420,nqn=$nqn,nr_io_queues=2" >/dev/nvme-fabrics ||
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
mrs=$(rdma resource show mr dev srnv1 2>/dev/null | grep -c 'mrn' || true)
qps=$(rdma resource show qp link srnv1/1 2>/dev/null | grep -c 'lqpn' || true)
log "srnv1 while connected: $qps QPs, $mrs MRs"
((qps >= 4)) || fail "expected the admin and I/O queues' QPs on srnv1, got $qps"

# Data: direct I/O of several sizes (one page, many pages per request),
# written through the host and read back, compared byte for byte; and the
# target's block device holds the same bytes.
hw() { cat "/sys/class/infiniband/srnv1/ports/1/hw_counters/$1"; }
sent0=$(hw sent_pkts) reg0=$(hw fast_reg) linv0=$(hw local_inv) rinv0=$(hw remote_inv)
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
log "srnv1: sent_pkts +$sent, fast_reg +$reg, local_inv +$linv, remote_inv +$rinv"
((sent > 3 * 24 * 1024)) || fail "too few packets for 3 x 2 x 24 MiB: $sent"
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
data_qps() { rdma resource show qp link srnv1/1 2>/dev/null | grep lqpn | grep -vc 'lqpn 1 ' || true; }
for _ in $(seq 50); do
	(($(data_qps) == 0)) && break
	sleep 0.2
done
log "srnv1 after disconnect: $(data_qps) QPs besides QP1, $(rdma resource show mr dev srnv1 2>/dev/null | grep -c mrn || true) MRs"
(($(data_qps) == 0)) || fail "QPs left on srnv1 after the disconnect: $(rdma resource show qp link srnv1/1)"
