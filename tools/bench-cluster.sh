#!/usr/bin/env bash
# The cluster's workloads (UCX, MPI, NVMe over RDMA, NFS over RDMA) on the
# kernel's rxe and on sroce between VMs, in rounds that alternate the
# providers (SROCE_BENCH_ROUNDS, default 3): medians, spreads and sroce/rxe
# ratios (selftests/cluster-bench/10-workloads.sh). Prints; asserts nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SROCE_ROOT"
bash tools/prepare.sh >/dev/null
kdir=$(SROCE_KERNEL_VARIANT=modular bash tools/build-kernel.sh)
KDIR=$kdir exec bash selftests/cluster.sh --bench
