#!/usr/bin/env bash
# The demo: build everything, boot a VM with two "hosts" (network namespaces
# joined by a veth pair), create an sroce device on each, and show what
# rdma-core sees.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$(bash "$SROCE_ROOT/tools/prepare.sh")
exec bash "$SROCE_ROOT/selftests/run.sh" --demo
