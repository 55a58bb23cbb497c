"""A webhook receiver for waverun's tests, on loopback, that checks every delivery with
implementations nobody here wrote: the signature with the Standard Webhooks library
(`standardwebhooks` from PyPI), the body with the CloudEvents SDK (`cloudevents` from PyPI,
structured JSON mode). Pins: tests/webhooks/requirements.txt.

    receiver.py --port 0 --port-file F [--secret whsec_… ...] [--max-seconds 600]

It answers each delivery as its mode says (POST /_mode {"mode": M, ...}):
    ok          204 (the default)
    fail        {"status": 500} that status, or {"retryAfter": S} with a Retry-After header
    slow        {"seconds": S} waits S seconds, then 204
    never       holds the connection open without answering (until the client gives up)
    redirect    307 to {"location": URL}
    big         200 with a body of {"bytes": N} bytes
A delivery whose signature or CloudEvent does not check out gets 400 with the reason, whatever
the mode. A request cut short (the connection closed before Content-Length bytes came, as
when the sender is killed mid-request) is no delivery: not listed, only counted
(GET /_cutShort). GET /_deliveries lists every delivery received, in order, with what was checked:
    {"webhookId", "webhookTimestamp", "verifiedWith": [secret index, ...], "signatureError",
     "event": {the CloudEvent's attributes and data} | null, "eventError", "answered"}
POST /_secrets {"secret": "whsec_…"} adds a secret it verifies with (one a daemon showed once).
The process ends by itself after --max-seconds.
"""

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cloudevents.core.bindings import http as ce_http
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class State:
    def __init__(self, secrets):
        self.lock = threading.Lock()
        self.mode = {"mode": "ok"}
        self.deliveries = []
        self.cut_short = 0
        self.hooks = [Webhook(s) for s in secrets]


def check(state, headers, body):
    """What an independent receiver makes of one delivery."""
    lower = {k.lower(): v for k, v in headers.items()}
    rec = {
        "webhookId": lower.get("webhook-id"),
        "webhookTimestamp": lower.get("webhook-timestamp"),
        "contentType": lower.get("content-type"),
        "verifiedWith": [],
        "signatureError": None,
        "event": None,
        "eventError": None,
    }
    errors = []
    for i, hook in enumerate(state.hooks):
        try:
            hook.verify(body, lower)
            rec["verifiedWith"].append(i)
        except WebhookVerificationError as e:
            errors.append("secret %d: %s" % (i, e))
    if state.hooks and not rec["verifiedWith"]:
        rec["signatureError"] = "; ".join(errors)
    try:
        ev = ce_http.from_http_event(ce_http.HTTPMessage(headers=lower, body=body))
        attrs = {}
        for k, v in ev.get_attributes().items():
            attrs[k] = v.isoformat().replace("+00:00", "Z") if hasattr(v, "isoformat") else v
        attrs["data"] = ev.get_data()
        rec["event"] = attrs
    except Exception as e:  # the SDK's validation errors, or a body that is not JSON
        rec["eventError"] = "%s: %s" % (type(e).__name__, e)
    return rec


def handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body(self):
            """The request's body, or None when the sender went away before sending all of it
            (a daemon killed mid-request): that is no delivery, and nobody is left to answer."""
            n = int(self.headers.get("Content-Length") or 0)
            got = self.rfile.read(n)
            if len(got) < n:
                self.close_connection = True
                return None
            return got

        def do_GET(self):
            if self.path == "/_deliveries":
                with state.lock:
                    out = json.dumps(state.deliveries).encode()
                return self.reply(200, out, [("Content-Type", "application/json")])
            if self.path == "/_cutShort":
                with state.lock:
                    out = json.dumps({"cutShort": state.cut_short}).encode()
                return self.reply(200, out, [("Content-Type", "application/json")])
            self.reply(404)

        def do_POST(self):
            body = self.body()
            if body is None:
                with state.lock:
                    state.cut_short += 1
                return
            if self.path == "/_mode":
                with state.lock:
                    state.mode = json.loads(body)
                return self.reply(204)
            if self.path == "/_secrets":
                with state.lock:
                    state.hooks.append(Webhook(json.loads(body)["secret"]))
                return self.reply(204)
            rec = check(state, dict(self.headers), body)
            with state.lock:
                mode = dict(state.mode)
            if rec["signatureError"] or rec["eventError"]:
                status, extra = 400, []
            elif mode["mode"] == "fail":
                status = int(mode.get("status", 500))
                extra = [("Retry-After", str(mode["retryAfter"]))] if "retryAfter" in mode else []
            elif mode["mode"] == "redirect":
                status, extra = 307, [("Location", mode.get("location", "/elsewhere"))]
            elif mode["mode"] == "big":
                status, extra = 200, []
            else:
                status, extra = 204, []
            rec["answered"] = status if mode["mode"] != "never" else None
            with state.lock:
                state.deliveries.append(rec)
            if mode["mode"] == "never":
                time.sleep(float(mode.get("seconds", 3600)))
                self.close_connection = True
                return
            if mode["mode"] == "slow":
                time.sleep(float(mode.get("seconds", 1)))
            why = (rec["signatureError"] or rec["eventError"] or "").encode()
            if mode["mode"] == "big" and status == 200:
                why = b"x" * int(mode.get("bytes", 1 << 20))
            self.reply(status, why, extra)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gave up on a slow or silent answer: expected here, not worth a trace.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--secret", action="append", default=[])
    ap.add_argument("--max-seconds", type=float, default=600)
    args = ap.parse_args()
    state = State(args.secret)
    server = Server(("127.0.0.1", args.port), handler(state))
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    threading.Timer(args.max_seconds, server.shutdown).start()
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
