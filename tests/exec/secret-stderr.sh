#!/bin/sh
# An exec provider that echoes its secret to stderr (as a careless `set -x` would), then fails.
. "$(dirname "$0")/common.sh"
echo "+ curl -H 'Authorization: Bearer $PLATFORM_TOKEN' https://platform.example/upgrade" >&2
respond Failure '{"code":"Unavailable","message":"the platform is down","retryable":true,"retryAfterSeconds":7}'
exit 1
