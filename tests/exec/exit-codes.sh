#!/bin/sh
# An exec provider that answers with an exit code only ($EXIT_CODE), or a Success response with
# that exit code when $SAY_SUCCESS is set: the exit-code table of exec-provider.md.
. "$(dirname "$0")/common.sh"
if [ -n "$SAY_SUCCESS" ]; then respond Success '{}'; fi
exit "$EXIT_CODE"
