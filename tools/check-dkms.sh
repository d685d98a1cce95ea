#!/usr/bin/env bash
# DKMS builds sroce.ko from the tree's files (dkms.conf, the Makefile)
# against the test kernel, in private DKMS trees: nothing under /usr/src,
# /var/lib/dkms or /lib/modules is touched. KDIR names the kernel tree.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$SROCE_ROOT"
: "${KDIR:?KDIR must name a built kernel tree}"
command -v dkms >/dev/null || die "dkms is not installed (tools/setup-host.sh installs it)"
# dkms wants root; the kernel's Rust build wants the toolchain on PATH.
run=(env PATH="$PATH" LIBCLANG_PATH="$LIBCLANG_PATH")
[[ $(id -u) == 0 ]] || run=(sudo "${run[@]}")

ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf)
kver=$(make -s -C "$KDIR" kernelrelease)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/sroce-$ver" "$t/dkms"
git ls-files -z | xargs -0 cp --parents -t "$t/src/sroce-$ver"
trees=(--sourcetree "$t/src" --dkmstree "$t/dkms")
"${run[@]}" dkms add -m sroce -v "$ver" "${trees[@]}" >/dev/null
if ! "${run[@]}" dkms build -m sroce -v "$ver" -k "$kver" "${trees[@]}" --kernelsourcedir "$KDIR"; then
	cat "$t/dkms/sroce/$ver/build/make.log" 2>/dev/null | tail -n 30 >&2 || true
	die "dkms build failed"
fi
ko=$t/dkms/sroce/$ver/$kver/$(uname -m)/module/sroce.ko
[[ -f $ko ]] || die "dkms built no $ko"
magic=$(modinfo -F vermagic "$ko")
[[ $magic == "$kver "* ]] || die "the DKMS-built sroce.ko is for '$magic', not $kver"
log "dkms built sroce $ver for $kver ($magic)"
