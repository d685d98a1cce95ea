#!/bin/bash
# Shared receive queues and address handles through the rxe provider
# library: sizes, limits, the SRQ limit, an SRQ in use, AH lifecycle,
# cleanup on close.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1
check_verbs_program verbs_srq_ah "$DEV1" "$(gid_index "$DEV1" 10.77.1.1)"
