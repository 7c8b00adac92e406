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

# PortRcvErrorDetails and PortXmitDiscardDetails (perfquery -E / -D): metric -> (ibsim's
# PerformanceSet attribute, perfquery field).
DETAIL_COUNTERS = {
    "receive_local_physical_errors_total": ("PortRcvErrorDetails", "PortLocalPhysicalErrors"),
    "receive_malformed_packet_errors_total": ("PortRcvErrorDetails", "PortMalformedPktErrors"),
    "receive_buffer_overrun_errors_total": ("PortRcvErrorDetails", "PortBufferOverrunErrors"),
    "receive_dlid_mapping_errors_total": ("PortRcvErrorDetails", "PortDLIDMappingErrors"),
    "receive_vl_mapping_errors_total": ("PortRcvErrorDetails", "PortVLMappingErrors"),
    "receive_looping_errors_total": ("PortRcvErrorDetails", "PortLoopingErrors"),
    "transmit_inactive_discards_total": ("PortXmitDiscardDetails", "PortInactiveDiscards"),
    "transmit_neighbor_mtu_discards_total": ("PortXmitDiscardDetails", "PortNeighborMTUDiscards"),
    "transmit_switch_lifetime_limit_discards_total": ("PortXmitDiscardDetails",
                                                      "PortSwLifetimeLimitDiscards"),
    "transmit_switch_hol_lifetime_limit_discards_total": ("PortXmitDiscardDetails",
                                                          "PortSwHOQLifetimeLimitDiscards"),
}

# What the fabric collector's `counters: errors_and_traffic` exports for an ibsim switch port
# (its PMA has no QP1Dropped; error details are read only with error_details: true): every
# counter but the unicast/multicast packet counts.
ERRORS_AND_TRAFFIC = set(ERROR_COUNTERS) | {
    "transmit_bytes_total", "receive_bytes_total", "transmit_packets_total",
    "receive_packets_total"}
