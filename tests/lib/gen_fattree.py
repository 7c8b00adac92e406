#!/usr/bin/env python3
"""Writes an ibsim topology (ibnetdiscover-style) of a two-level fat tree.

Every leaf has `hcas_per_leaf` single-port HCAs on ports 1..H and one uplink to every spine on
ports H+1..H+S; spine s's port l is cabled to leaf l. The defaults (32 leaves, 16 spines,
18 HCAs per leaf) give 48 switches, 576 HCAs and 1,600 switch ports in use.

    gen_fattree.py [--leaves N] [--spines N] [--hcas-per-leaf N] [--switch-ports N] [-o FILE]

fattree3() writes a three-level one (pods of leaves and spines under a core layer), for the
benches' 10,000-HCA fabrics (bench/fabric_10k.py); ibsim needs raised limits for those
(simfabric.SimFabric's `limits`). The tests use fattree() only.

    gen_fattree.py --pods P --leaves N --spines N --hcas-per-leaf N --core-links N [-o FILE]
"""

import argparse
import sys


def leaf_name(i):
    return "leaf-%02d" % i


def spine_name(i):
    return "spine-%02d" % i


def hca_name(leaf, j, hcas_per_leaf):
    return "node-%03d mlx5_0" % ((leaf - 1) * hcas_per_leaf + j)


def fattree(leaves=32, spines=16, hcas_per_leaf=18, switch_ports=None, device_ids=None):
    """The topology text. switch_ports defaults to the smallest count that fits (at least 8).
    device_ids=(vendor, switch device, HCA device) gives every node the NodeInfo IDs of a real
    device (e.g. (0x2c9, 0xd2f2, 0x1021): Quantum-2 switches, ConnectX-7 HCAs), so that the
    daemon knows the switches' PortXmitWait tick; None keeps ibsim's defaults."""

    def ids(kind):
        # ibsim applies `vendid` to the next node only, `devid` until the next `devid`.
        if device_ids is None:
            return []
        vendor, switch, hca = device_ids
        return ["vendid=%#x" % vendor, "devid=%#x" % (switch if kind == "Switch" else hca)]
    need = max(hcas_per_leaf + spines, leaves)
    ports = switch_ports or max(8, need)
    if ports < need:
        raise ValueError("switch_ports=%d too small, need %d" % (ports, need))
    if ports > 254:
        raise ValueError("at most 254 switch ports")
    out = ["# two-level fat tree: %d leaves, %d spines, %d HCAs per leaf"
           % (leaves, spines, hcas_per_leaf), ""]
    for s in range(1, spines + 1):
        out += ids("Switch")
        out.append('Switch\t%d "%s"' % (ports, spine_name(s)))
        for l in range(1, leaves + 1):
            out.append('[%d]\t"%s"[%d]' % (l, leaf_name(l), hcas_per_leaf + s))
        out.append("")
    for l in range(1, leaves + 1):
        out += ids("Switch")
        out.append('Switch\t%d "%s"' % (ports, leaf_name(l)))
        for j in range(1, hcas_per_leaf + 1):
            out.append('[%d]\t"%s"[1]' % (j, hca_name(l, j, hcas_per_leaf)))
        for s in range(1, spines + 1):
            out.append('[%d]\t"%s"[%d]' % (hcas_per_leaf + s, spine_name(s), l))
        out.append("")
    for l in range(1, leaves + 1):
        for j in range(1, hcas_per_leaf + 1):
            out += ids("Hca")
            out.append('Hca\t1 "%s"' % hca_name(l, j, hcas_per_leaf))
            out.append('[1]\t"%s"[%d]' % (leaf_name(l), j))
            out.append("")
    return "\n".join(out) + "\n"


def fattree3(pods=10, leaves=25, spines=40, hcas_per_leaf=40, core_links=5):
    """A three-level fat tree. Every pod has `leaves` leaves and `spines` spines; a leaf has
    `hcas_per_leaf` HCAs on ports 1..H and one uplink to every spine of its pod (ports H+1..H+S).
    A spine has one downlink to every leaf of its pod (ports 1..L) and L uplinks (ports
    L+1..2L) to the cores of its plane: spine s of every pod is in plane s, which has
    pods * L / (pods * core_links) cores, each with `core_links` parallel cables to spine s of
    every pod (core ports 1..pods*core_links). Non-blocking when S = H (leaf) and the spine's L
    up = L down. The defaults: 10 pods x (25 leaves x 40 HCAs) = 10,000 HCAs; leaves of 80
    ports, spines of 50, cores of 50 (5 per plane, 200 in all): 850 switches, 50,000 switch
    ports, every port cabled."""
    if leaves % core_links:
        raise ValueError("leaves (%d) must be a multiple of core_links (%d)" % (leaves, core_links))
    cores_per_plane = leaves // core_links
    leaf_ports, spine_ports, core_ports = hcas_per_leaf + spines, 2 * leaves, pods * core_links
    if max(leaf_ports, spine_ports, core_ports) > 254:
        raise ValueError("at most 254 switch ports")

    def leaf(p, l):
        return "leaf-%02d-%02d" % (p, l)

    def spine(p, s):
        return "spine-%02d-%02d" % (p, s)

    def core(s, c):
        return "core-%02d-%02d" % (s, c)

    def hca(p, l, j):
        return "node-%05d mlx5_0" % (((p - 1) * leaves + l - 1) * hcas_per_leaf + j)

    out = ["# three-level fat tree: %d pods x (%d leaves x %d HCAs, %d spines), %d cores"
           % (pods, leaves, hcas_per_leaf, spines, spines * cores_per_plane), ""]
    for s in range(1, spines + 1):
        for c in range(1, cores_per_plane + 1):
            out.append('Switch\t%d "%s"' % (core_ports, core(s, c)))
            for p in range(1, pods + 1):
                for k in range(core_links):
                    # spine uplink u (0-based) goes to core u // core_links, its link u % ...
                    u = (c - 1) * core_links + k
                    out.append('[%d]\t"%s"[%d]' % ((p - 1) * core_links + k + 1, spine(p, s),
                                                    leaves + u + 1))
            out.append("")
    for p in range(1, pods + 1):
        for s in range(1, spines + 1):
            out.append('Switch\t%d "%s"' % (spine_ports, spine(p, s)))
            for l in range(1, leaves + 1):
                out.append('[%d]\t"%s"[%d]' % (l, leaf(p, l), hcas_per_leaf + s))
            for u in range(leaves):
                c, k = u // core_links, u % core_links
                out.append('[%d]\t"%s"[%d]' % (leaves + u + 1, core(s, c + 1),
                                                (p - 1) * core_links + k + 1))
            out.append("")
        for l in range(1, leaves + 1):
            out.append('Switch\t%d "%s"' % (leaf_ports, leaf(p, l)))
            for j in range(1, hcas_per_leaf + 1):
                out.append('[%d]\t"%s"[1]' % (j, hca(p, l, j)))
            for s in range(1, spines + 1):
                out.append('[%d]\t"%s"[%d]' % (hcas_per_leaf + s, spine(p, s), l))
            out.append("")
    for p in range(1, pods + 1):
        for l in range(1, leaves + 1):
            for j in range(1, hcas_per_leaf + 1):
                out.append('Hca\t1 "%s"' % hca(p, l, j))
                out.append('[1]\t"%s"[%d]' % (leaf(p, l), j))
                out.append("")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--leaves", type=int, default=32)
    p.add_argument("--spines", type=int, default=16)
    p.add_argument("--hcas-per-leaf", type=int, default=18)
    p.add_argument("--switch-ports", type=int, default=None)
    p.add_argument("--pods", type=int, default=None, help="three levels (fattree3)")
    p.add_argument("--core-links", type=int, default=5)
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args(argv)
    if a.pods:
        text = fattree3(a.pods, a.leaves, a.spines, a.hcas_per_leaf, a.core_links)
    else:
        text = fattree(a.leaves, a.spines, a.hcas_per_leaf, a.switch_ports)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
