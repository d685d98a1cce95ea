#!/bin/bash
# Queue pairs through the rxe provider library: rings mapped into the
# process, granted sizes, the IBTA state machine and its required
# attributes, query, bad values, cleanup on close.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1
check_verbs_program verbs_qp "$DEV1" "$(gid_index "$DEV1" 10.77.1.1)"
