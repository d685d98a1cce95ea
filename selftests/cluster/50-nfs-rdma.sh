#!/bin/bash
# NFS over RDMA between two VMs: node 1 exports a tmpfs with the kernel's
# NFS server (nfsd, rpc.mountd for the export table, an RDMA listener on
# port 20049 through sunrpc's RDMA transport), node 0 mounts it with
# `mount -o rdma,port=20049` (NFSv4, the kernel client over xprtrdma). Files
# written through the mount are read back through it after a remount
# (nothing from the client's cache) and checked against what the server's
# own filesystem holds; the mount's transport must be rdma and both nodes'
# sroce counters must move.
# timeout: 600
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"

for t in rpc.nfsd rpc.mountd exportfs mount.nfs rpcbind; do
	command -v "$t" >/dev/null || fail "$t not installed (nfs-kernel-server, nfs-common; tools/setup-host.sh)"
done
sroce_on 0
sroce_on 1
server=$(ip_of 1)
export_dir=/run/sroce-nfs-export
mnt=/run/sroce-nfs-mnt

cleanup_nfs() {
	umount -f "$mnt" 2>/dev/null
	on 1 "set +e; rpc.nfsd 0; exportfs -ua; pkill -x rpc.mountd; pkill -x rpcbind; sleep 0.5
		umount /proc/fs/nfsd /var/lib/nfs $export_dir
		modprobe -r -d $MODROOT nfsd rpcrdma" >/dev/null 2>&1
	modprobe -r -d "$MODROOT" nfsv4 nfs rpcrdma >/dev/null 2>&1
	true
}
on_exit cleanup_nfs

# The server: state under tmpfs (the guest's root is the host's, read-
# only), NFSv4 only, a short grace period (a fresh server refuses new
# opens for its length).
on 1 "modprobe -d $MODROOT nfsd && modprobe -d $MODROOT rpcrdma &&
	mkdir -p $export_dir && mount -t tmpfs -o size=128m tmpfs $export_dir &&
	mount -t tmpfs tmpfs /var/lib/nfs && mkdir -p /var/lib/nfs/v4recovery /run/rpcbind &&
	touch /var/lib/nfs/etab /var/lib/nfs/rmtab &&
	{ mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; } &&
	rpcbind -w && exportfs -o rw,no_root_squash,fsid=0,insecure,no_subtree_check '*:$export_dir' &&
	rpc.mountd -N 2 -N 3 &&
	rpc.nfsd -N 3 -V 4 -U --rdma=20049 -G 10 -L 10 4 &&
	grep -q 'rdma 20049' /proc/fs/nfsd/portlist" ||
	fail "cannot start the NFS server on node 1: $(on 1 "cat /proc/fs/nfsd/portlist; dmesg | tail -n 5" 2>&1)"
log "node 1: nfsd listening on $(on 1 "tr '\n' ' ' </proc/fs/nfsd/portlist")"

modprobe -d "$MODROOT" nfsv4 || fail "modprobe nfsv4"
modprobe -d "$MODROOT" rpcrdma || fail "modprobe rpcrdma"
mkdir -p "$mnt"
rx0=$(counter_on 1 sroce0 rcvd_pkts) tx0=$(counter_on 0 sroce0 sent_pkts)
out=$(timeout $((120 * SCALE)) mount -t nfs4 -o rdma,port=20049 "$server:/" "$mnt" 2>&1) ||
	fail "mount -o rdma,port=20049 $server:/ failed: $out $(dmesg | tail -n 5)"
xprt=$(awk -v m="$mnt" '$0 ~ "mounted on " m " " { f = 1 } f && /xprt:/ { print $2; exit }' /proc/self/mountstats)
assert_eq rdma "$xprt" "the NFS mount's transport (/proc/self/mountstats)"
log "mounted $server:/ on $mnt over $xprt: $(grep " $mnt " /proc/mounts)"

# Files of several sizes, and a directory of small ones.
declare -A sums
for f in big:16M mid:1M small:5000 tiny:1; do
	name=${f%%:*} size=${f#*:}
	head -c "$size" /dev/urandom >"$TEST_TMP/$name" 2>/dev/null ||
		dd if=/dev/urandom of="$TEST_TMP/$name" bs="$size" count=1 status=none
	cp "$TEST_TMP/$name" "$mnt/$name" || fail "writing $name through the mount"
	sums[$name]=$(sha256sum <"$TEST_TMP/$name" | cut -d' ' -f1)
done
mkdir "$mnt/dir"
for i in $(seq 50); do echo "file $i of the sroce NFS test" >"$mnt/dir/f$i"; done
sync
umount "$mnt" || fail "umount"
out=$(timeout $((120 * SCALE)) mount -t nfs4 -o rdma,port=20049 "$server:/" "$mnt" 2>&1) || fail "remount failed: $out"
for name in "${!sums[@]}"; do
	assert_eq "${sums[$name]}" "$(sha256sum <"$mnt/$name" | cut -d' ' -f1)" "$name read back through the mount"
	assert_eq "${sums[$name]}" "$(on 1 "sha256sum <$export_dir/$name" | cut -d' ' -f1)" "$name on the server's filesystem"
done
assert_eq 50 "$(ls "$mnt/dir" | wc -l)" "files in the directory"
assert_eq "file 37 of the sroce NFS test" "$(cat "$mnt/dir/f37")" "a small file read back"
umount "$mnt" || fail "umount"
rx=$(($(counter_on 1 sroce0 rcvd_pkts) - rx0)) tx=$(($(counter_on 0 sroce0 sent_pkts) - tx0))
log "node 0's sroce0 sent $tx packets, node 1's received $rx"
((tx >= 1000 && rx >= 1000)) || fail "the NFS traffic did not go over sroce (sent $tx, received $rx)"
