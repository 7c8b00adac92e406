#!/usr/bin/env python3
"""A webhook receiver for Alertmanager that writes each notification to a file as text a person
reads: when, which receiver (the URL's path: /pager, /chat), firing or resolved, and each
alert's name, severity and description. For the demo (scripts/demo.sh) and for trying the
shipped configuration before pointing it at a real pager or chat:

    deploy/alertmanager/webhook_logger.py --listen 127.0.0.1:19094 --file notifications.log
    # in alertmanager.yml: url: http://127.0.0.1:19094/pager (and /chat)

Standard library only; not meant to face a network.
"""

import argparse
import http.server
import json
import sys
import time


def render(path, payload):
    alerts = payload.get("alerts", [])
    lines = ["%s  %s  %s  %d alert(s)  group %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S"), path.strip("/") or "/", payload.get("status", "?"),
        len(alerts), json.dumps(payload.get("groupLabels", {}), sort_keys=True))]
    for a in alerts:
        labels = a.get("labels", {})
        annotations = a.get("annotations", {})
        lines.append("  [%s] %s (%s): %s" % (
            a.get("status", "?"), labels.get("alertname", "?"), labels.get("severity", "-"),
            annotations.get("description") or annotations.get("summary", "")))
    return "\n".join(lines) + "\n\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", default="127.0.0.1:19094", help="host:port")
    parser.add_argument("--file", required=True, help="the file notifications are appended to")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                text = render(self.path, json.loads(body))
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            with open(args.file, "a") as f:
                f.write(text)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    print("webhook_logger: http://%s:%s/ -> %s" % (host or "127.0.0.1", port, args.file),
          file=sys.stderr)
    server.serve_forever()


if __name__ == "__main__":
    main()
