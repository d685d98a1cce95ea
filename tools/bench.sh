#!/usr/bin/env bash
# The benchmark: the perftest matrix on the kernel's rxe and on sroce in the
# same VM run, printed as sroce/rxe ratios. Prints; asserts nothing.
#   SROCE_BENCH_ITERS=N   iterations per case (default 100)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$SROCE_ROOT/tools/prepare.sh" >/dev/null
exec bash "$SROCE_ROOT/selftests/run.sh" --bench
