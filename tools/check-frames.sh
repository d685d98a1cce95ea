#!/usr/bin/env bash
# Stack frames of sroce.ko against the kernel's own limit: no function may
# reserve more stack than the tree's CONFIG_FRAME_WARN, the bound the
# compiler enforces on C (-Wframe-larger-than) but not on Rust. A kernel
# stack is 16 KiB and the receive softirq nests transmit inside receive, so
# a frame that holds a queue or a counter array can overflow it.
#   tools/check-frames.sh [KO]   (KDIR: the build tree; KO: sroce.ko)
# Prints every function over the limit and fails if there is one. A step of
# tools/test.sh (not in --debug-kernel mode: KASAN's redzones enlarge
# every frame).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ko=${1:-$SROCE_ROOT/sroce.ko}
[[ -f $ko ]] || die "no module at $ko (build it first)"
: "${KDIR:?KDIR: the kernel build tree}"
limit=$(sed -n 's/^CONFIG_FRAME_WARN=//p' "$KDIR/.config")
if [[ -z $limit || $limit == 0 ]]; then
	log "CONFIG_FRAME_WARN is not set in $KDIR: no limit to check"
	exit 0
fi
objdump -d -C --no-show-raw-insn "$ko" | python3 -c '
import re, sys
limit = int(sys.argv[1])
fn = None
over = {}
for line in sys.stdin:
    m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
    # (demangled: drop the crate hash, keep the path)
    if m:
        fn = re.sub(r"\[[0-9a-f]{16}\]", "", m.group(1))
        continue
    # The frame is reserved once, by the prologue: sub $N,%rsp.
    m = re.search(r"\bsub\s+\$0x([0-9a-f]+),%rsp", line)
    if m and fn is not None:
        n = int(m.group(1), 16)
        if n > limit:
            over[fn] = max(n, over.get(fn, 0))
for fn, n in sorted(over.items(), key=lambda kv: -kv[1]):
    print(f"{n:6} {fn}", flush=True)
sys.exit(1 if over else 0)
' "$limit" && { log "every stack frame of $(basename "$ko") is within $limit bytes"; exit 0; }
die "the functions above reserve more stack than CONFIG_FRAME_WARN ($limit bytes)"
