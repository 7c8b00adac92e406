"""The PMA counters ibfabricd exports, as infiniband-diags' perfquery names them, for tests that
compare the daemon with perfquery. ibsim's PMA has CapabilityMask2 0: its extended set holds no
error counters, so error counters are read with `perfquery` (PortCounters) and data counters with
`perfquery -x` (PortCountersExtended).

metric (without its ibfabric_<collector>_ prefix) -> perfquery field; data counters also give
the scale from the field to the metric (the data fields count 4-octet words).
"""

ERROR_COUNTERS = {
    "symbol_errors_total": "SymbolErrorCounter",
    "link_error_recoveries_total": "LinkErrorRecoveryCounter",
    "link_downed_total": "LinkDownedCounter",
    "receive_errors_total": "PortRcvErrors",
    "receive_remote_physical_errors_total": "PortRcvRemotePhysicalErrors",
    "receive_switch_relay_errors_total": "PortRcvSwitchRelayErrors",
    "transmit_discards_total": "PortXmitDiscards",
    "transmit_constraint_errors_total": "PortXmitConstraintErrors",
    "receive_constraint_errors_total": "PortRcvConstraintErrors",
    "local_link_integrity_errors_total": "LocalLinkIntegrityErrors",
    "excessive_buffer_overrun_errors_total": "ExcessiveBufferOverrunErrors",
    "vl15_dropped_total": "VL15Dropped",
    "transmit_wait_ticks_total": "PortXmitWait",
}

DATA_COUNTERS = {
    "transmit_bytes_total": ("PortXmitData", 4),
    "receive_bytes_total": ("PortRcvData", 4),
    "transmit_packets_total": ("PortXmitPkts", 1),
    "receive_packets_total": ("PortRcvPkts", 1),
    "unicast_transmit_packets_total": ("PortUnicastXmitPkts", 1),
    "unicast_receive_packets_total": ("PortUnicastRcvPkts", 1),
    "multicast_transmit_packets_total": ("PortMulticastXmitPkts", 1),
    "multicast_receive_packets_total": ("PortMulticastRcvPkts", 1),
}
