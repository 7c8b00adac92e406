"""A store of the tests' own for ibfabric-localize: an HTTP server answering the localizer's
PromQL queries as Prometheus's /api/v1/query does, from a small fat tree (2 leaves, 1 spine, 4
hosts probing each other) whose cable into h3 drops 30 % of the packets, h3's port counting the
errors. `mode` makes every query fail; `query_modes` makes the queries matching a text fail
alone (tests/e2e/test_localize_service.py lists the failures)."""

import http.server
import json
import threading
import time
import urllib.parse

HOSTS = ["h1", "h2", "h3", "h4"]
GUID = {"leaf-1": "0x0000000000a00001", "leaf-2": "0x0000000000a00002",
        "spine-1": "0x0000000000b00001"}
for i, h in enumerate(HOSTS, 1):
    GUID[h] = "0x0000000000c0000%d" % i


def leaf_of(h):
    return "leaf-%d" % ((HOSTS.index(h) // 2) + 1)


def port_of(h):
    return HOSTS.index(h) % 2 + 1


def route(src, dst):
    """Hops (from, from port, to, to port); leaves reach the spine on port 3."""
    ls, ld = leaf_of(src), leaf_of(dst)
    hops = [(src, 1, ls, port_of(src))]
    if ls != ld:
        hops += [(ls, 3, "spine-1", int(ls[-1])), ("spine-1", int(ld[-1]), ld, 3)]
    return hops + [(ld, port_of(dst), dst, 1)]


def hop_labels(hop):
    """As the paths collector names a cable: the switch end is a; direction of the hop."""
    f, fp, t, tp = hop
    f_is_a = not f.startswith("h") if f.startswith("h") != t.startswith("h") else \
        (GUID[f], fp) < (GUID[t], tp)
    a, ap, b, bp = (f, fp, t, tp) if f_is_a else (t, tp, f, fp)
    return {"node_guid": GUID[a], "port": str(ap), "node_name": a, "remote_node_guid": GUID[b],
            "remote_port": str(bp), "remote_node_name": b,
            "direction": "a_to_b" if f_is_a else "b_to_a"}


def instance(h):
    return "%s:10916" % h


PAIRS = [(a, b) for a in HOSTS for b in HOSTS if a != b]
DROPPING = ("leaf-2", 1, "h3", 1)  # into h3


# How a query can fail (FakeApi.mode for all, FakeApi.query_modes for some).
FAILURES = {
    "error": "an HTTP 500 with the API's error JSON",
    "garbage": "an HTTP 200 with an HTML page",
    "truncated": "the API's JSON cut in the middle",
    "slow": "the right answer after FakeApi.slow_seconds",
    "nan": "the right answer with every value NaN",
    "inf": "the right answer with every value +Inf",
    "empty": "no series (the store lacks the metric)",
    "huge": "the right answer after 1 MiB of blanks (valid JSON)",
}


class FakeApi:
    """Answers instant queries from the fabric above. `mode` makes every query fail as FAILURES
    says; `query_modes` {text: mode} those whose PromQL contains the text. `authorization`: the
    Authorization header every query must carry (401 otherwise). `tls`: an ssl.SSLContext to
    serve with. `port`: to listen on (0: any)."""

    def __init__(self, tls=None, port=0):
        self.mode = "ok"
        self.query_modes = {}
        self.slow_seconds = 2.5
        self.authorization = None
        self.newest_age = 1.0
        self.queries = []
        self.times = []  # the evaluation time of each query, as the localizer asked for it
        self.marker = 1
        self.counters = True  # h3's port counts the errors of its drops
        self.links_down = []  # (node GUID, port) of cable ends down in the window
        # ibfabric:job_node: (namespace, job name) -> the nodes it runs on (each host's daemon
        # carries its node name, the host's own here).
        self.jobs = {("train", "llama"): ["h1", "h2", "h3"], ("train", "bert"): ["h3", "h4"],
                     ("other", "elsewhere"): ["h9"]}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                query = form.get("query", [""])[0]
                outer.queries.append(query)
                outer.times.append(float(form.get("time", ["nan"])[0]))
                if outer.authorization and \
                        self.headers.get("Authorization") != outer.authorization:
                    return self.reply(401, b'{"status":"error","errorType":"unauthorized",'
                                           b'"error":"bad credentials"}')
                mode = outer.mode
                for text, m in list(outer.query_modes.items()):
                    if text in query:
                        mode = m
                if mode == "error":
                    return self.reply(500, b'{"status":"error","errorType":"internal",'
                                           b'"error":"overloaded"}')
                if mode == "garbage":
                    return self.reply(200, b"<html>502 Bad Gateway</html>")
                if mode == "slow":
                    time.sleep(outer.slow_seconds)
                result = [] if mode == "empty" else outer.answer(query)
                if mode in ("nan", "inf"):
                    for series in result:
                        series["value"][1] = "NaN" if mode == "nan" else "+Inf"
                body = json.dumps({"status": "success",
                                   "data": {"resultType": "vector", "result": result}}).encode()
                if mode == "truncated":
                    body = body[:len(body) // 2]
                if mode == "huge":
                    body = b" " * (1 << 20) + body
                self.reply(200, body)

            def reply(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the localizer gave up on a slow answer

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 128  # the localizer sends its queries side by side

        self.server = Server(("127.0.0.1", port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, q):
        now = time.time()

        def series(labels, value):
            return {"metric": labels, "value": [now, str(value)]}

        def pair(p, q_):
            return {"job": "ibfabric", "instance": instance(p), "peer": "%s mlx5_0" % q_,
                    "transport": "mad"}

        def daemon(h):
            return {"job": "ibfabric", "instance": instance(h)}
        crossing = lambda p, q_: DROPPING in route(p, q_) + route(q_, p)  # noqa: E731
        if "ibfabric_probe_sent_total" in q:
            return [series(pair(p, q_), 600) for p, q_ in PAIRS]
        if "ibfabric_probe_lost_total" in q:
            return [series(pair(p, q_), 180 if crossing(p, q_) else 0) for p, q_ in PAIRS]
        if "ibfabric_event_loop_stall_seconds_total" in q:
            return [series(daemon(h), 0) for h in HOSTS]
        if "ibfabric_probe_spikes_total" in q:
            # None over 5 in 10 minutes (the query asks for those only).
            return [] if "[10m]" in q else [series(pair(p, q_), 0) for p, q_ in PAIRS]
        if q.startswith("max(timestamp(ibfabric_probe_node_info"):
            return [series({}, now - self.newest_age)]
        if "ibfabric_probe_node_info" in q:
            return [series(dict(daemon(h), node_guid=GUID[h], node_name=h, node=h), 1)
                    for h in HOSTS]
        if "ibfabric:job_node" in q:
            return [series({"namespace": ns, "job_name": name, "node": node}, 1)
                    for (ns, name), nodes in self.jobs.items() for node in nodes]
        if "ibfabric_path_traces_total" in q:
            return [series(daemon(h), self.marker if h == "h1" else 1) for h in HOSTS]
        if q.startswith("ibfabric_path_hop_info"):
            return [series(dict(pair(p, q_), leg=leg, hop=str(n), **hop_labels(hop)), 1)
                    for p, q_ in PAIRS if instance(p) in q
                    for leg, hops in (("to_peer", route(p, q_)), ("from_peer", route(q_, p)))
                    for n, hop in enumerate(hops, 1)]
        if q.startswith("ibfabric_path_peer_info"):
            return [series(dict(pair(p, q_), peer_node_guid=GUID[q_], peer_node_name=q_), 1)
                    for p, q_ in PAIRS if instance(p) in q]
        if "min_over_time(ibfabric_ports_state" in q:
            return [series({"node_guid": g, "port": str(p)}, 1) for g, p in self.links_down]
        if q.startswith("max by (node_guid, port) (") and "side=\"local\"" in q and \
                "receive_errors" in q and self.counters:
            return [series({"node_guid": GUID["h3"], "port": "1"}, 180)]
        return []
