"""Routes as `ibtracert` prints them: the ground truth the paths collector and the localization
rules are held against (never the daemon's own series).

Python standard library only.
"""

import re

HOP = re.compile(r'^\[(\d+)\] -> \S+ port \{0x[0-9a-f]+\}\[(\d+)\] lid \S+ "([^"]*)"')
FROM = re.compile(r'^From \S+ \{0x[0-9a-f]+\} portnum (\d+) lid \S+ "([^"]*)"')


def ibtracert_hops(fabric, host, slid, dlid):
    """[(from name, from port, to name, to port)] of `ibtracert SLID DLID` run on `host` of a
    simfabric.SimFabric, in order; None when ibtracert fails (no route)."""
    r = fabric.run_tool(["ibtracert", str(slid), str(dlid)], host=host, check=False)
    if r.returncode != 0:
        return None
    hops, name, port = [], None, None
    for line in r.stdout.splitlines():
        m = FROM.match(line)
        if m:
            port, name = int(m.group(1)), m.group(2)
            continue
        m = HOP.match(line)
        if m:
            out_port, in_port, to = int(m.group(1)), int(m.group(2)), m.group(3)
            # A CA's line names the port it left by ("From ca ... portnum"); a switch's, its egress.
            hops.append((name, port if not hops else out_port, to, in_port))
            name, port = to, None
    return hops


def pair_links(fabric, lids, pairs, host):
    """{(prober, peer): set of (sender, port, receiver, port)}: every cable direction the pair's
    probes (prober -> peer) and answers (peer -> prober) cross, by ibtracert run on `host`.
    Raises when a route is missing."""
    out = {}
    for prober, peer in pairs:
        links = set()
        for slid, dlid in ((lids[prober], lids[peer]), (lids[peer], lids[prober])):
            hops = ibtracert_hops(fabric, host, slid, dlid)
            if not hops:
                raise AssertionError("ibtracert %d %d found no route" % (slid, dlid))
            links.update(hops)
        out[(prober, peer)] = links
    return out
