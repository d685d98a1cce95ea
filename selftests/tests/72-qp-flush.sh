#!/bin/bash
# A QP entering the error state completes its posted receives with flush
# errors, in order, and the completion event reaches the channel.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1
check_verbs_program verbs_flush "$DEV1"
