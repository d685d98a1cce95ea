#!/usr/bin/env bash
# Everything before running anything: host packages, the test kernel (cached),
# and sroce.ko built against it. Prints the kernel tree's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$SROCE_ROOT/tools/setup-host.sh" >&2
kdir=$(bash "$SROCE_ROOT/tools/build-kernel.sh")
log "building sroce.ko against $kdir"
make -s -C "$SROCE_ROOT" KDIR="$kdir" modules >&2
echo "$kdir"
