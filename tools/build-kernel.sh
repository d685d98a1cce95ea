#!/usr/bin/env bash
# Builds the test kernel sroce runs on: Debian's linux-source-7.3, configured
# from tinyconfig + kvm_guest.config + kconfig/sroce.config (+ kconfig/
# debug.config, built with LLVM, when SROCE_DEBUG_KERNEL=1; + kconfig/
# modular.config, the RDMA core and UDP tunnels as modules as distributions
# build them, when SROCE_KERNEL_VARIANT=modular). The tree is
# cached under $SROCE_CACHE keyed by kernel version, config and toolchain, so
# a repeat run is free and a changed fragment gets a fresh build.
# Prints the kernel tree's path on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$SROCE_CACHE/dl"
fragment="$SROCE_ROOT/kconfig/sroce.config"
link=kernel
if [[ $SROCE_DEBUG_KERNEL == 1 ]]; then
	# One fragment file, so the key and the check below see both.
	fragment="$SROCE_CACHE/debug-kernel.config"
	cat "$SROCE_ROOT/kconfig/sroce.config" "$SROCE_ROOT/kconfig/debug.config" >"$fragment"
	link=kernel-debug
elif [[ ${SROCE_KERNEL_VARIANT:-} == modular ]]; then
	fragment="$SROCE_CACHE/modular-kernel.config"
	cat "$SROCE_ROOT/kconfig/sroce.config" "$SROCE_ROOT/kconfig/modular.config" >"$fragment"
	link=kernel-modular
fi

private_apt_setup
pkgver=$(private_apt apt-cache policy "$SROCE_KPKG" | awk '/Candidate:/ {print $2}')
[[ -n $pkgver && $pkgver != "(none)" ]] || die "$SROCE_KPKG not found in $SROCE_KSUITE"
key=$( { echo "$pkgver"; [[ -z ${LLVM:-} ]] || echo "LLVM=$LLVM"; cat "$fragment"; sed -n '/^# config-key-begin/,/^# config-key-end/p' "$0"; } | sha256sum | cut -c1-16)
tree="$SROCE_CACHE/linux-$pkgver-$key"
tree=${tree//\~/_}; tree=${tree//+/_}

if [[ -f $tree/.sroce-built ]]; then
	ln -sfn "$tree" "$SROCE_CACHE/$link"
	echo "$tree"
	exit 0
fi

log "kernel $SROCE_KPKG $pkgver, config key $key: building in $tree"
deb=$(ls "$SROCE_CACHE"/dl/"${SROCE_KPKG}"_*.deb 2>/dev/null | head -n1 || true)
if [[ -z $deb || $deb != *"${pkgver//\~/%7e}"* && $deb != *"$pkgver"* ]]; then
	rm -f "$SROCE_CACHE"/dl/"${SROCE_KPKG}"_*.deb
	(cd "$SROCE_CACHE/dl" && private_apt apt-get -q download "$SROCE_KPKG=$pkgver" >/dev/null)
	deb=$(ls "$SROCE_CACHE"/dl/"${SROCE_KPKG}"_*.deb | head -n1)
fi
rm -rf "$tree" "$tree.tmp"
mkdir -p "$tree.tmp/deb"
dpkg-deb -x "$deb" "$tree.tmp/deb"
tarball=$(ls "$tree.tmp"/deb/usr/src/linux-source-*.tar.* | head -n1)
tar -xf "$tarball" -C "$tree.tmp"
src=$(find "$tree.tmp" -mindepth 1 -maxdepth 1 -type d -name 'linux-source-*' | head -n1)
mv "$src" "$tree"
rm -rf "$tree.tmp"

cd "$tree"
make -s rustavailable >/dev/null || die "the Rust toolchain is not usable for this kernel (make rustavailable)"
# config-key-begin (changes here change the cache key)
make -s tinyconfig >/dev/null
scripts/kconfig/merge_config.sh -m .config kernel/configs/kvm_guest.config "$fragment" >/dev/null
make -s olddefconfig >/dev/null
# config-key-end

# merge_config drops what Kconfig refuses; catch that here, not in the VM.
# A later line of the fragment overrides an earlier one.
declare -A want=()
while IFS= read -r line; do
	[[ $line =~ ^(CONFIG_[A-Z0-9_]+)=(.*)$ ]] && want[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done <"$fragment"
missing=()
for opt in "${!want[@]}"; do
	if [[ ${want[$opt]} == n ]]; then
		grep -q "^$opt=" .config && missing+=("$opt=n")
	else
		grep -qx "$opt=${want[$opt]}" .config || missing+=("$opt=${want[$opt]}")
	fi
done
((${#missing[@]} == 0)) || die "kernel config did not take: ${missing[*]}"

make -s -j"$(nproc)" bzImage modules
touch .sroce-built
ln -sfn "$tree" "$SROCE_CACHE/$link"
log "kernel ready: $tree"
echo "$tree"
