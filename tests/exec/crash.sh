#!/bin/sh
# An exec provider that crashes: killed by a signal halfway through, having printed half a response.
. "$(dirname "$0")/common.sh"
printf '{"apiVersion":"exec.waverun.dev/v1alpha1","kind":"Provi'
kill -KILL $$
