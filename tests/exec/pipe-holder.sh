#!/bin/sh
# An exec provider that answers properly but leaves something behind: every call after
# `capabilities` starts a process in a session of its own (out of reach of the group kill) that
# inherits stdout and stderr and holds them open for minutes, and appends its pid to
# $PIPE_HOLDER_PIDS (a background job is no group leader, so setsid(1) does not fork: $! is the
# holder). The call must still end when this command exits, with its answer.
. "$(dirname "$0")/common.sh"
setsid sleep 300 &
echo $! >>"$PIPE_HOLDER_PIDS"
# Answer only once it leads its own session (field 6 of its stat): were it still in this
# command's group when the command exits, the group kill would end it and hold nothing open.
until [ "$(cut -d' ' -f6 "/proc/$!/stat")" = "$!" ]; do sleep 0.01; done
echo "left a process holding stdout and stderr" >&2
respond Success '{"controlPlane":{"version":"1.33.2"},"nodePools":[]}'
exit 0
