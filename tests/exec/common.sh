# Shared by the misbehaving exec providers: answer `capabilities` properly (so the daemon
# accepts the provider) and print a response from the request's environment.
API=exec.waverun.dev/v1alpha1
cat >/dev/null # the request: read it all, as a provider must
respond() { # respond STATUS RESULT_OR_ERROR_JSON
  if [ "$1" = Success ]; then body="\"result\":$2"; else body="\"error\":$2"; fi
  printf '{"apiVersion":"%s","kind":"ProviderResponse","operation":"%s","requestId":"%s","status":"%s",%s}' \
    "$API" "$WAVERUN_OPERATION" "$WAVERUN_REQUEST_ID" "$1" "$body"
}
if [ "$WAVERUN_OPERATION" = capabilities ]; then
  respond Success "{\"apiVersions\":[\"$API\"],\"operations\":[\"describe\",\"start-upgrade\",\"get-operation\"]}"
  exit 0
fi
