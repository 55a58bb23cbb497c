#!/bin/sh
# An exec provider that hangs: every call after `capabilities` starts a child that sleeps, records
# both pids in $HANG_PIDS, and sleeps past any deadline. The daemon must kill the whole group.
. "$(dirname "$0")/common.sh"
trap '' TERM # it ignores SIGTERM too (and so do its children): only SIGKILL stops it
sleep 300 &
echo "$$ $!" > "$HANG_PIDS"
sleep 300
