#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_http_client and fuzz_evidence_reader from the store of the
tests' own (tests/lib/fake_store.py: 4 hosts, a cable into h3 dropping 30 %): raw HTTP answers
for the client (plain, chunked, an error, cut short, not HTTP), and for the reader one input
whose parts answer each query the reader sends as that store would (with the failing variants
the service test uses). Run from this directory:
    python3 make_store_seeds.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import fake_store  # noqa: E402

# A text each query the reader sends holds (query/evidence_reader.cpp; the window is 60s).
QUERIES = {
    "ibfabric_probe_sent_total": "sum by (job, instance, peer, transport) (increase(ibfabric_probe_sent_total[60s]))",
    "ibfabric_probe_lost_total": "sum by (job, instance, peer, transport) (increase(ibfabric_probe_lost_total[60s]))",
    "ibfabric_probe_spikes_total[60s]": "sum by (job, instance, peer, transport) (increase(ibfabric_probe_spikes_total[60s]))",
    "max(timestamp(": "max(timestamp(ibfabric_probe_node_info))",
    "last_over_time(ibfabric_probe_node_info": "max by (job, instance, node_guid, node_name) (last_over_time(ibfabric_probe_node_info[10m]))",
    "ibfabric_path_traces_total": "sum by (job, instance) (ibfabric_path_traces_total)",
    "ibfabric_path_hop_info": "ibfabric_path_hop_info{instance=~\"(h1:10916|h2:10916|h3:10916|h4:10916)\"}",
    "ibfabric_path_peer_info": "ibfabric_path_peer_info{instance=~\"(h1:10916|h2:10916|h3:10916|h4:10916)\"}",
    "ibfabric_event_loop_stall_seconds_total": "sum by (job, instance) (increase(ibfabric_event_loop_stall_seconds_total[60s]))",
    'side="local"': 'max by (node_guid, port) (receive_errors{side="local"})',
}


def body(result):
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def main():
    api = fake_store.FakeApi.__new__(fake_store.FakeApi)  # answers only: no server
    api.newest_age, api.marker, api.counters = 1.0, 1, True
    answers = {text: body(api.answer(q)) for text, q in QUERIES.items()}
    write("evidence_reader", "fabric", "\n--\n".join(
        "%s\n%s" % (text, b) for text, b in answers.items()))
    failing = dict(answers)
    failing['side="local"'] = '{"status":"error","errorType":"internal","error":"overloaded"}'
    failing["last_over_time(ibfabric_probe_node_info"] = answers[
        "last_over_time(ibfabric_probe_node_info"][:40]
    failing["ibfabric_probe_lost_total"] = answers["ibfabric_probe_lost_total"].replace(
        '"0"', '"NaN"')
    write("evidence_reader", "fabric-partial", "\n--\n".join(
        "%s\n%s" % (text, b) for text, b in failing.items()))
    write("evidence_reader", "empty", body([]))
    sent = answers["ibfabric_probe_sent_total"]
    http = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    write("http_client", "ok", http % (len(sent), sent))
    chunks = "".join("%x\r\n%s\r\n" % (len(sent[i:i + 100]), sent[i:i + 100])
                     for i in range(0, len(sent), 100))
    write("http_client", "chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
          chunks + "0\r\n\r\n")
    error = '{"status":"error","errorType":"bad_data","error":"parse error"}'
    write("http_client", "error", "HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" %
          (len(error), error))
    write("http_client", "cut", (http % (len(sent), sent))[:200])
    write("http_client", "not-http", "SSH-2.0-OpenSSH_9.2\r\n")


if __name__ == "__main__":
    main()
