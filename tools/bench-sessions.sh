#!/usr/bin/env bash
# The sessions benchmark: two tc-shaped paths between two VM hosts; prints
# the throughput of two-session groups over one session (two QPs; one QP
# with the multipath transport over two equal links; one QP over links of
# unequal rate against their sum), one QP's goodput with loss on one link
# against rxe's, the failover time when a path is cut, and whether a
# stream survives link flaps. Prints; asserts nothing.
#   SROCE_BENCH_RATE=R       tc rate of each path (default 40mbit)
#   SROCE_BENCH_SLOW_RATE=R  the slower link of the unequal case (20mbit)
#   SROCE_BENCH_LOSS=P       loss on one link in the loss case (1%)
#   SROCE_BENCH_SECS=N       seconds per throughput run (default 8)
#   SROCE_BENCH_REPEATS=N    runs per throughput figure, median printed
#                            (default 3)
#   SROCE_BENCH_FLAPS=N      link flaps in the flap stream (default 4; 0: none)
#   SROCE_BENCH_RPS=MASK     receive flow steering on the veths (default every
#                            CPU, as a NIC's RSS keeps a flow on one CPU; 0: off)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$SROCE_ROOT/tools/prepare.sh" >/dev/null
exec bash "$SROCE_ROOT/selftests/run.sh" --bench-sessions
