#!/usr/bin/env bash
# The benchmark: the perftest matrix on the kernel's rxe and on sroce in the
# same VM run, in alternating rounds; prints medians, spreads, sroce/rxe
# ratios, message rates and CPU seconds per GiB. Prints; asserts nothing.
#   SROCE_BENCH_ROUNDS=N     rounds per provider (default 3)
#   SROCE_BENCH_CASES=ERE    only the cases whose "tool size" matches
#   SROCE_BENCH_KO_B=PATH    also run this other sroce.ko (say, the code
#                            before a change) and print sroce/sroce_b ratios
#   SROCE_BENCH_PROFILE=1    also profile some cases with perf (where the
#                            time goes, by symbol, for rxe and for sroce)
# and more in selftests/bench-vm.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$SROCE_ROOT/tools/prepare.sh" >/dev/null
exec bash "$SROCE_ROOT/selftests/run.sh" --bench
