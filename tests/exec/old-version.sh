#!/bin/sh
# An exec provider that speaks only a protocol version this daemon does not.
cat >/dev/null
printf '{"apiVersion":"exec.waverun.dev/v1alpha1","kind":"ProviderResponse","operation":"%s","requestId":"%s","status":"Success","result":{"apiVersions":["exec.waverun.dev/v2"]}}' "$WAVERUN_OPERATION" "$WAVERUN_REQUEST_ID"
