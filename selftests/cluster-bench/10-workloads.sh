#!/bin/bash
# The cluster's workloads timed on rxe and on sroce in one run (run by
# `selftests/cluster.sh --bench`, tools/bench-cluster.sh): rounds alternate
# the providers; per case it prints the median of the rounds, the spread
# ((max - min) / median) and the sroce/rxe ratio. A benchmark: it prints,
# it asserts nothing about speed (a run that fails to move data fails).
# Cases, node 0 the client or host, node 1 the server or target:
#   ucx tag_bw 64 KiB (MB/s), ucx tag_lat 8 B (us, median), both rc_verbs;
#   MPI: the checked 3-rank job of 30-mpi-ucx (seconds, lower is better);
#   NVMe-oF: fio sequential write and read, 256 KiB blocks (MB/s);
#   NFS over RDMA: a 32 MiB file written (with fsync) and read back after
#   a remount (MB/s).
# timeout: 6600
# shellcheck source=../cluster-lib.sh
. "$(dirname "$0")/../cluster-lib.sh"

rounds=${SROCE_BENCH_ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ucx_env=(UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=dev0:1 UCX_UD_ETH_DGID_CHECK=n)
declare -A results=()
cases=("ucx tag_bw 64K (MB/s)" "ucx tag_lat 8B (us)" "MPI job (s)" "nvme write (MB/s)" "nvme read (MB/s)"
	"nfs write (MB/s)" "nfs read (MB/s)")
record() {
	[[ $3 =~ ^[0-9.]+$ ]] || fail "$1, $2: no number measured ('$3')"
	results[$1|$2]+=" $3"
	log "round $round $2: $1 = $3"
}

provider_on() { # PROV NODE
	if [[ $1 == sroce ]]; then sroce_on "$2" dev0; else rxe_on "$2" dev0; fi
}
provider_off() {
	local n
	for ((n = 0; n < NODES; n++)); do on_node "$n" "cleanup_between" >/dev/null 2>&1 || true; done
}

ucx() { # PROV TEST SIZE ITERS FIELD
	local out
	on_bg 1 "$TEST_TMP/ucx-server.log" "${ucx_env[*]} ucx_perftest -p 13337"
	local srv=$BG_PID
	wait_listen_on 1 13337
	out=$(env "${ucx_env[@]}" timeout $((300 * SCALE)) ucx_perftest "$(ip_of 1)" -p 13337 -t "$2" -s "$3" -n "$4" -w 20 2>&1) ||
		fail "$1: ucx_perftest -t $2 failed: $(tail -n 3 <<<"$out")"
	wait "$srv" || true
	awk -v f="$5" '/^Final:/ { print $f }' <<<"$out"
}

mpi_seconds() {
	local hosts= n t0 out
	for ((n = 0; n < NODES; n++)); do hosts+=${hosts:+,}$(ip_of "$n"):1; done
	t0=$(date +%s.%N)
	out=$(timeout $((600 * SCALE)) mpirun -np "$NODES" --host "$hosts" \
		--mca plm_rsh_agent "$SELFTESTS_DIR/cluster-agent.py run" --mca oob_tcp_if_include "$NETDEV" \
		--mca btl self --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=dev0:1 \
		-x UCX_UD_ETH_DGID_CHECK=n -x PATH "$SROCE_BIN/mpi_check" 3 2>&1) || fail "MPI job failed: $(tail -n 5 <<<"$out")"
	assert_contains "$out" "all checks passed" "the MPI job"
	echo "$(date +%s.%N) - $t0" | bc -l | xargs printf '%.1f\n'
}

nqn=nqn.2026-11.org.sroce:cluster-bench
cfs=/sys/kernel/config/nvmet
nvme_rates() { # prints "WRITE READ" in MB/s
	local dev= c out w r
	on 1 "modprobe -d $MODROOT null_blk nr_devices=1 gb=1 bs=4096 memory_backed=1 && modprobe -d $MODROOT nvmet-rdma &&
		mkdir $cfs/subsystems/$nqn && echo 1 >$cfs/subsystems/$nqn/attr_allow_any_host &&
		mkdir $cfs/subsystems/$nqn/namespaces/1 && echo /dev/nullb0 >$cfs/subsystems/$nqn/namespaces/1/device_path &&
		echo 1 >$cfs/subsystems/$nqn/namespaces/1/enable && mkdir $cfs/ports/1 &&
		echo rdma >$cfs/ports/1/addr_trtype && echo ipv4 >$cfs/ports/1/addr_adrfam &&
		echo $(ip_of 1) >$cfs/ports/1/addr_traddr && echo 4420 >$cfs/ports/1/addr_trsvcid &&
		ln -s $cfs/subsystems/$nqn $cfs/ports/1/subsystems/$nqn" >&2 || fail "NVMe target"
	modprobe -d "$MODROOT" nvme-rdma
	nvme connect -t rdma -a "$(ip_of 1)" -s 4420 -n "$nqn" -i 2 >&2 || fail "nvme connect"
	for _ in $(seq 100); do
		for c in /sys/class/nvme/nvme*; do
			[[ -e $c/subsysnqn && $(cat "$c/subsysnqn") == "$nqn" && -b /dev/${c##*/}n1 ]] && dev=/dev/${c##*/}n1
		done
		[[ -n $dev ]] && break
		sleep 0.2
	done
	[[ -n $dev ]] || fail "no NVMe namespace"
	for rw in write read; do
		out=$(fio --name=seq --filename="$dev" --direct=1 --ioengine=libaio --iodepth=16 --rw="$rw" \
			--bs=256k --size=256M --output-format=json 2>/dev/null) || fail "fio $rw"
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0][sys.argv[1]]; print("%.1f" % (j["bw_bytes"] / 1e6))' "$rw" <<<"$out"
	done | tr '\n' ' '
	echo
	nvme disconnect -n "$nqn" >&2
	on 1 "rm -f $cfs/ports/1/subsystems/$nqn; rmdir $cfs/ports/1; echo 0 >$cfs/subsystems/$nqn/namespaces/1/enable
		rmdir $cfs/subsystems/$nqn/namespaces/1 $cfs/subsystems/$nqn; modprobe -r -d $MODROOT nvmet_rdma nvmet null_blk" >&2
	modprobe -r -d "$MODROOT" nvme_rdma nvme_fabrics nvme_core
}

nfs_rates() { # prints "WRITE READ" in MB/s
	local mnt=/run/sroce-bench-nfs exp=/run/sroce-bench-export t0 t1 t2
	on 1 "modprobe -d $MODROOT nfsd && modprobe -d $MODROOT rpcrdma && mkdir -p $exp &&
		mount -t tmpfs -o size=256m tmpfs $exp && mount -t tmpfs tmpfs /var/lib/nfs &&
		mkdir -p /var/lib/nfs/v4recovery /run/rpcbind && touch /var/lib/nfs/etab /var/lib/nfs/rmtab &&
		{ mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; } && rpcbind -w &&
		exportfs -o rw,no_root_squash,fsid=0,insecure,no_subtree_check '*:$exp' && rpc.mountd -N 2 -N 3 &&
		rpc.nfsd -N 3 -V 4 -U --rdma=20049 -G 10 -L 10 4" >&2 || fail "NFS server"
	modprobe -d "$MODROOT" nfsv4
	modprobe -d "$MODROOT" rpcrdma
	mkdir -p "$mnt"
	mount -t nfs4 -o rdma,port=20049 "$(ip_of 1):/" "$mnt" || fail "NFS mount"
	head -c 32M /dev/urandom >"$TEST_TMP/nfs-file"
	t0=$(date +%s.%N)
	dd if="$TEST_TMP/nfs-file" of="$mnt/file" bs=1M conv=fsync status=none || fail "NFS write"
	t1=$(date +%s.%N)
	umount "$mnt"
	mount -t nfs4 -o rdma,port=20049 "$(ip_of 1):/" "$mnt" || fail "NFS remount"
	t2=$(date +%s.%N)
	cmp "$mnt/file" "$TEST_TMP/nfs-file" || fail "NFS read back differs"
	echo "33.554432 / ($t1 - $t0)" | bc -l | xargs printf '%.1f '
	echo "33.554432 / ($(date +%s.%N) - $t2)" | bc -l | xargs printf '%.1f\n'
	umount "$mnt"
	on 1 "rpc.nfsd 0; exportfs -ua; pkill -x rpc.mountd; pkill -x rpcbind; sleep 0.5
		umount /proc/fs/nfsd /var/lib/nfs $exp; modprobe -r -d $MODROOT nfsd rpcrdma" >&2 || true
	modprobe -r -d "$MODROOT" nfsv4 nfs rpcrdma || true
}

command -v bc >/dev/null || fail "bc is needed"
for ((round = 1; round <= rounds; round++)); do
	order=(rxe sroce)
	((round % 2 == 0)) && order=(sroce rxe)
	for prov in "${order[@]}"; do
		for ((n = 0; n < NODES; n++)); do provider_on "$prov" "$n"; done
		v=$(ucx "$prov" tag_bw 65536 2000 7)
		record "$prov" "${cases[0]}" "$v"
		v=$(ucx "$prov" tag_lat 8 2000 3)
		record "$prov" "${cases[1]}" "$v"
		v=$(mpi_seconds)
		record "$prov" "${cases[2]}" "$v"
		nvme_rates >"$TEST_TMP/rates"
		read -r w r <"$TEST_TMP/rates"
		record "$prov" "${cases[3]}" "$w"
		record "$prov" "${cases[4]}" "$r"
		nfs_rates >"$TEST_TMP/rates"
		read -r w r <"$TEST_TMP/rates"
		record "$prov" "${cases[5]}" "$w"
		record "$prov" "${cases[6]}" "$r"
		provider_off
	done
done

# median and spread of a list of numbers
stats() { python3 -c '
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
m = statistics.median(v)
print("%.2f %d" % (m, round(100 * (max(v) - min(v)) / m) if m else 0))' "$@"; }
echo "| case | rxe | ±% | sroce | ±% | sroce/rxe |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
	# shellcheck disable=SC2086 # lists of numbers
	read -r rm rs <<<"$(stats ${results[rxe|$c]})"
	# shellcheck disable=SC2086
	read -r sm ss <<<"$(stats ${results[sroce|$c]})"
	printf '| %s | %s | %s | %s | %s | %.2f |\n' "$c" "$rm" "$rs" "$sm" "$ss" \
		"$(python3 -c 'import sys; print(float(sys.argv[1]) / float(sys.argv[2]))' "$sm" "$rm")"
done
