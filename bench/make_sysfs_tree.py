#!/usr/bin/env python3
"""Writes a scaled-up sysfs tree for benchmarks: N HCAs (default 8) x P ports (default 2), each a
copy of the ConnectX-7 fixture's device (tests/fixtures/sysfs/cx7-ndr) with its full counters/
and hw_counters/, laid out as the kernel lays it out (class symlinks into devices/, a device
link per HCA, PCI addresses of their own).

Usage: make_sysfs_tree.py OUT_DIR [--hcas N] [--ports P]
"""

import argparse
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "sysfs", "cx7-ndr")
PCI_PARENT = "devices/pci0000:00/0000:00:01.0"
SOURCE_PCI = "0000:17:00.0"


def make_tree(out, hcas=8, ports=2):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "class", "infiniband"))
    src_dev = os.path.join(FIXTURE, PCI_PARENT, SOURCE_PCI)
    for i in range(hcas):
        pci = "0000:%02x:00.0" % (0x17 + i)
        name = "mlx5_%d" % i
        dev = os.path.join(out, PCI_PARENT, pci)
        os.makedirs(dev)
        for f in ("vendor", "device"):
            shutil.copy(os.path.join(src_dev, f), dev)
        ib = os.path.join(dev, "infiniband", name)
        shutil.copytree(os.path.join(src_dev, "infiniband", "mlx5_0"), ib, symlinks=True)
        os.unlink(os.path.join(ib, "device"))
        os.symlink("../../../" + pci, os.path.join(ib, "device"))
        with open(os.path.join(ib, "node_guid"), "w") as f:
            f.write("b83f:d203:00%02x:0001\n" % i)
        for p in range(2, ports + 1):
            shutil.copytree(os.path.join(ib, "ports", "1"), os.path.join(ib, "ports", str(p)))
        os.symlink(os.path.join("..", "..", PCI_PARENT, pci, "infiniband", name),
                   os.path.join(out, "class", "infiniband", name))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hcas", type=int, default=8)
    ap.add_argument("--ports", type=int, default=2)
    a = ap.parse_args()
    make_tree(a.out, a.hcas, a.ports)
