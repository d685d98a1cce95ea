#!/usr/bin/env bash
# Installs everything sroce needs on a Debian 12 (or later) machine:
# kernel build tools, the Rust pieces the kernel wants, QEMU + virtme-ng
# for the VM tests, rdma-core's userspace tools and the cluster tests'
# workloads (used inside the VMs, which share the host's root filesystem).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Some of what is checked lives in /usr/sbin (nvme, rpc.nfsd, depmod).
export PATH="$PATH:/usr/sbin:/sbin"
stamp="$SROCE_CACHE/host-setup.v3"
if [[ -f $stamp && ${SROCE_FORCE_SETUP:-0} != 1 ]]; then
	# Cheap re-check so a machine that lost a package still gets it.
	if command -v vng >/dev/null && command -v bindgen >/dev/null &&
	   command -v qemu-system-x86_64 >/dev/null && command -v ibv_devinfo >/dev/null &&
	   command -v mpirun >/dev/null && command -v fio >/dev/null && command -v nvme >/dev/null &&
	   command -v rpc.nfsd >/dev/null &&
	   [[ -d $LIBCLANG_PATH ]]; then
		exit 0
	fi
fi
mkdir -p "$SROCE_CACHE"
export DEBIAN_FRONTEND=noninteractive
SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo

log "installing Debian packages"
$SUDO apt-get -q update >/dev/null
$SUDO apt-get -q install -y --no-install-recommends \
	build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils zstd \
	python3 python3-pip pahole kmod iproute2 ethtool \
	libclang-19-dev clang-19 lld-19 llvm-19 \
	rdma-core ibverbs-utils rdmacm-utils perftest ibverbs-providers \
	libibverbs-dev librdmacm-dev \
	busybox procps psmisc udev dkms >/dev/null
# The cluster tests' real workloads (selftests/cluster): MPI over UCX, NVMe
# over RDMA with nvme-cli and fio, NFS over RDMA.
$SUDO apt-get -q install -y --no-install-recommends \
	openmpi-bin libopenmpi-dev libucx0 ucx-utils fio nvme-cli \
	nfs-kernel-server nfs-common rpcbind >/dev/null

# QEMU: the suite's newest build (bookworm-backports on Debian 12), which is
# the one virtme-ng was checked with here. Installed through sroce's private
# apt configuration so the machine's sources stay as they were.
log "installing QEMU"
private_apt_setup
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
SUDO_APT=(private_apt apt-get); [[ -z $SUDO ]] || SUDO_APT=(sudo bash -c "$(declare -f private_apt private_apt_dir); SROCE_CACHE=$SROCE_CACHE private_apt apt-get \"\$@\"" --)
"${SUDO_APT[@]}" -q install -y --no-install-recommends -t "$codename-backports" \
	qemu-system-x86 qemu-utils >/dev/null ||
	$SUDO apt-get -q install -y --no-install-recommends qemu-system-x86 >/dev/null

log "installing Rust pieces (rust-src, bindgen-cli)"
command -v rustup >/dev/null || die "rustup is required (https://rustup.rs)"
rustup component add rust-src rustfmt clippy >/dev/null
if ! command -v bindgen >/dev/null; then
	cargo install --locked bindgen-cli >/dev/null 2>&1 || die "cargo install bindgen-cli failed"
fi

log "installing virtme-ng"
if ! command -v vng >/dev/null; then
	pip3 install -q virtme-ng 2>/dev/null || pip3 install -q --break-system-packages virtme-ng
fi
command -v vng >/dev/null || die "vng not on PATH after installing virtme-ng"
touch "$stamp"
log "host ready"
