#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_mad_decode: a few MAD answers as a subnet manager agent or a
performance management agent sends them back (GetResp, status 0), laid out by hand from the
IBA vol 1 attribute layouts (PortInfo 14.2.5.6, ClassPortInfo 13.4.8.1, PortCounters 16.1.3.5,
PortCountersExtended 16.1.4.11, NodeDescription 14.2.5.2). The values are plausible, not
captured; the fuzzer only needs well-formed starting points. Run from this directory:
    python3 make_mad_seeds.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "mad_decode")


def mad(mgmt_class, attr_id, data, data_offset, status=0, attr_mod=0, tid=0x1234):
    m = bytearray(256)
    m[0] = 1  # base version
    m[1] = mgmt_class
    m[2] = 1  # class version
    m[3] = 0x81  # GetResp
    struct.pack_into(">H", m, 4, status)
    struct.pack_into(">Q", m, 8, tid)
    struct.pack_into(">H", m, 16, attr_id)
    struct.pack_into(">I", m, 20, attr_mod)
    m[data_offset:data_offset + len(data)] = data
    return bytes(m)


def port_info(lid, sm_lid, cap, state, phys, width, speed_ext):
    d = bytearray(64)
    struct.pack_into(">HHI", d, 16, lid, sm_lid, cap)
    d[30] = 0x03  # LinkWidthEnabled 1X,4X
    d[31] = 0x03  # LinkWidthSupported
    d[32] = width  # LinkWidthActive
    d[33] = (0x7 << 4) | state  # LinkSpeedSupported SDR..QDR, PortState
    d[34] = (phys << 4) | 2  # PortPhysicalState, LinkDownDefaultState
    d[35] = 0  # MKeyProtectBits, LMC
    d[36] = (0x1 << 4) | 0x7  # LinkSpeedActive SDR, LinkSpeedEnabled
    d[37] = (5 << 4) | 1  # NeighborMTU 4096, MasterSMSL
    d[38] = 0x4 << 4  # VLCap
    d[40] = 5  # MTUCap
    d[62] = (speed_ext << 4) | 0xf  # LinkSpeedExtActive, LinkSpeedExtSupported
    d[63] = 0xf  # LinkSpeedExtEnabled
    return bytes(d)


def class_port_info(cap_mask, cap_mask2):
    d = bytearray(64)
    d[0] = 1  # BaseVersion
    d[1] = 1  # ClassVersion
    struct.pack_into(">H", d, 2, cap_mask)
    struct.pack_into(">I", d, 4, (cap_mask2 << 5) | 18)  # CapabilityMask2, RespTimeValue
    return bytes(d)


def port_counters(port, saturated):
    d = bytearray(192)
    d[1] = port
    top16, top8, top32 = (0xffff, 0xff, 0xffffffff) if saturated else (3, 1, 123456)
    struct.pack_into(">HBBHHHHBB", d, 4, top16, top8, 2, 5, top16, 0, 1, 0, 0)
    struct.pack_into(">HHIIII", d, 20, 0, 7, top32, top32 // 2, 1000, 999)
    struct.pack_into(">I", d, 40, top32)  # PortXmitWait
    return bytes(d)


def port_counters_extended(port):
    d = bytearray(192)
    d[1] = port
    struct.pack_into(">QQQQQQQQ", d, 8, 1 << 40, 1 << 39, 10**9, 10**9 - 5, 42, 43, 44, 45)
    struct.pack_into(">QQ", d, 72, 2, 0)  # SymbolErrorCounter, LinkErrorRecoveryCounter
    return bytes(d)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "smp_portinfo_ndr": mad(0x01, 0x15, port_info(7, 1, 0x0251486a, 4, 5, 2, 8), 64),
        "drsmp_portinfo_down": mad(0x81, 0x15, port_info(0, 0, 0, 1, 2, 0, 0), 64, status=0x8000),
        "smp_nodedesc": mad(0x01, 0x10, b"sim-node HCA-1".ljust(64, b"\0"), 64),
        "pma_classportinfo": mad(0x04, 0x01, class_port_info(0x1700, 0x2), 64),
        "pma_portcounters": mad(0x04, 0x12, port_counters(1, False), 64, attr_mod=0),
        "pma_portcounters_saturated": mad(0x04, 0x12, port_counters(1, True), 64),
        "pma_portcounters_ext": mad(0x04, 0x1d, port_counters_extended(1), 64),
        "pma_busy": mad(0x04, 0x12, b"", 64, status=0x0001),
        "short_answer": mad(0x04, 0x12, port_counters(1, False), 64)[:100],
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
