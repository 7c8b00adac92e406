"""Reading a fabric's topology for comparisons: ibnetdiscover's output, and the fabric
collector's documented shard hash (docs/collectors.md, "Sharding").

Python standard library only.
"""

import re


def fnv1a_guid(guid):
    """FNV-1a 64 over the GUID's big-endian octets: the documented shard hash."""
    h = 0xcbf29ce484222325
    for b in guid.to_bytes(8, "big"):
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def parse_ibnetdiscover(text):
    """{switch guid: {"name", "lid", "ports", "links": {port: (remote guid, remote port)}}}."""
    switches = {}
    current = None
    for line in text.splitlines():
        m = re.match(r'Switch\s+(\d+)\s+"S-([0-9a-f]+)"\s+#\s+"([^"]*)".*\blid (\d+)', line)
        if m:
            current = {"ports": int(m.group(1)), "name": m.group(3), "lid": int(m.group(4)),
                       "links": {}}
            switches["0x%016x" % int(m.group(2), 16)] = current
            continue
        if not line.strip():
            current = None
            continue
        m = re.match(r'\[(\d+)\]\s+"[SH]-([0-9a-f]+)"\[(\d+)\]', line)
        if m and current is not None:
            current["links"][int(m.group(1))] = ("0x%016x" % int(m.group(2), 16),
                                                 int(m.group(3)))
    return switches
