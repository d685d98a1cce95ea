#!/bin/bash
# Completion queues through the rxe provider library: the ring is mapped
# into the process; sizes, limits, resize, notification requests and
# completion channels behave; nothing is left behind.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1
check_verbs_program verbs_cq "$DEV1"
