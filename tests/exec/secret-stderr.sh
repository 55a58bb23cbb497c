#!/bin/sh
# An exec provider that echoes its secret to stderr (as a careless `set -x` would), then fails;
# with $SECRET_IN_MESSAGE set, its Failure message carries the secret too.
. "$(dirname "$0")/common.sh"
echo "+ curl -H 'Authorization: Bearer $PLATFORM_TOKEN' https://platform.example/upgrade" >&2
message="the platform is down"
if [ -n "$SECRET_IN_MESSAGE" ]; then message="the platform refused token $PLATFORM_TOKEN"; fi
respond Failure "{\"code\":\"Unavailable\",\"message\":\"$message\",\"retryable\":true,\"retryAfterSeconds\":7}"
exit 1
