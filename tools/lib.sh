# Shared settings for sroce's scripts. Source it; do not run it.
# shellcheck shell=bash

SROCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SROCE_CACHE=${SROCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sroce}
# The kernel sroce targets, as Debian packages it.
SROCE_KPKG=${SROCE_KPKG:-linux-source-7.3}
SROCE_KSUITE=${SROCE_KSUITE:-trixie-backports}
SROCE_MIRROR=${SROCE_MIRROR:-http://deb.debian.org/debian}
# SROCE_DEBUG_KERNEL=1: the KASAN + lockdep kernel, built (with sroce.ko)
# by clang, since the kernel allows Rust with KASAN only when CC is clang.
SROCE_DEBUG_KERNEL=${SROCE_DEBUG_KERNEL:-0}
export SROCE_DEBUG_KERNEL
if [[ $SROCE_DEBUG_KERNEL == 1 ]]; then
	export LLVM=${LLVM:--19}
fi
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '[sroce] %s\n' "$*" >&2; }
die() { printf '[sroce] error: %s\n' "$*" >&2; exit 1; }

# apt with a private configuration: its own sources and lists under the
# cache, so the machine's /etc/apt is never changed.
private_apt_dir() { printf '%s/apt' "$SROCE_CACHE"; }
private_apt() {
	local tool=$1; shift
	local d; d=$(private_apt_dir)
	"$tool" -o Dir::Etc::SourceList="$d/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$d/lists" \
		-o Dir::Cache="$d/cache" \
		-o Dir::Etc::Preferences="$d/preferences" \
		-o Dir::Etc::PreferencesParts=/dev/null \
		-o APT::Sandbox::User=root "$@"
}
private_apt_setup() {
	local d; d=$(private_apt_dir)
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	local codename
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
	cat >"$d/sources.list" <<EOL
deb $SROCE_MIRROR $codename main
deb $SROCE_MIRROR $codename-updates main
deb $SROCE_MIRROR $codename-backports main
deb $SROCE_MIRROR $SROCE_KSUITE main
EOL
	# Nothing comes from the kernel's suite unless asked for by name.
	cat >"$d/preferences" <<EOL
Package: *
Pin: release a=$SROCE_KSUITE
Pin-Priority: 50
EOL
	private_apt apt-get -q update >/dev/null
}
