#!/bin/bash
# Protection domains through the rxe provider library: allocate, free, and
# leave some for close to release.
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"

one_device_in_h1
check_verbs_program verbs_pd "$DEV1" 200
