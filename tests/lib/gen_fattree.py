#!/usr/bin/env python3
"""Writes an ibsim topology (ibnetdiscover-style) of a two-level fat tree.

Every leaf has `hcas_per_leaf` single-port HCAs on ports 1..H and one uplink to every spine on
ports H+1..H+S; spine s's port l is cabled to leaf l. The defaults (32 leaves, 16 spines,
18 HCAs per leaf) give 48 switches, 576 HCAs and 1,600 switch ports in use.

    gen_fattree.py [--leaves N] [--spines N] [--hcas-per-leaf N] [--switch-ports N] [-o FILE]
"""

import argparse
import sys


def leaf_name(i):
    return "leaf-%02d" % i


def spine_name(i):
    return "spine-%02d" % i


def hca_name(leaf, j, hcas_per_leaf):
    return "node-%03d mlx5_0" % ((leaf - 1) * hcas_per_leaf + j)


def fattree(leaves=32, spines=16, hcas_per_leaf=18, switch_ports=None):
    """The topology text. switch_ports defaults to the smallest count that fits (at least 8)."""
    need = max(hcas_per_leaf + spines, leaves)
    ports = switch_ports or max(8, need)
    if ports < need:
        raise ValueError("switch_ports=%d too small, need %d" % (ports, need))
    if ports > 254:
        raise ValueError("at most 254 switch ports")
    out = ["# two-level fat tree: %d leaves, %d spines, %d HCAs per leaf"
           % (leaves, spines, hcas_per_leaf), ""]
    for s in range(1, spines + 1):
        out.append('Switch\t%d "%s"' % (ports, spine_name(s)))
        for l in range(1, leaves + 1):
            out.append('[%d]\t"%s"[%d]' % (l, leaf_name(l), hcas_per_leaf + s))
        out.append("")
    for l in range(1, leaves + 1):
        out.append('Switch\t%d "%s"' % (ports, leaf_name(l)))
        for j in range(1, hcas_per_leaf + 1):
            out.append('[%d]\t"%s"[1]' % (j, hca_name(l, j, hcas_per_leaf)))
        for s in range(1, spines + 1):
            out.append('[%d]\t"%s"[%d]' % (hcas_per_leaf + s, spine_name(s), l))
        out.append("")
    for l in range(1, leaves + 1):
        for j in range(1, hcas_per_leaf + 1):
            out.append('Hca\t1 "%s"' % hca_name(l, j, hcas_per_leaf))
            out.append('[1]\t"%s"[%d]' % (leaf_name(l), j))
            out.append("")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--leaves", type=int, default=32)
    p.add_argument("--spines", type=int, default=16)
    p.add_argument("--hcas-per-leaf", type=int, default=18)
    p.add_argument("--switch-ports", type=int, default=None)
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args(argv)
    text = fattree(a.leaves, a.spines, a.hcas_per_leaf, a.switch_ports)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
