#!/usr/bin/env bash
# The sessions benchmark: two tc-shaped paths between two VM hosts; prints
# the throughput of a two-session group over one session and the failover
# time when a path is cut. Prints; asserts nothing.
#   SROCE_BENCH_RATE=R    tc rate of each path (default 40mbit)
#   SROCE_BENCH_SECS=N    seconds per throughput run (default 8)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bash "$SROCE_ROOT/tools/prepare.sh" >/dev/null
exec bash "$SROCE_ROOT/selftests/run.sh" --bench-sessions
