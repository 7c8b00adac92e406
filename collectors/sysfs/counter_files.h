#pragma once
// What the kernel's counter files in sysfs are: the standard PortCounters files (counters/), the
// 64-bit legacy ones that supersede some of them (counters_ext/), and the hw_counters of the
// drivers whose names say what they count (mlx5, efa), each with the metric it becomes. The
// sysfs collector (sysfs_collector.cpp) reads the files and emits what these tables say.

#include <cstddef>
#include <string_view>

namespace ibfabric::sysfs {

// The standard PortCounters / PortCountersExtended files the kernel creates in ports/N/counters.
struct NamedCounter {
  std::string_view file;
  std::string_view metric;
  std::string_view help;
  // port_xmit_data and port_rcv_data count 4-octet words (InfiniBand PortXmitData/PortRcvData).
  double scale = 1;
};

inline constexpr NamedCounter kNamedCounters[] = {
    {"symbol_error", "ibfabric_sysfs_port_symbol_errors_total",
     "Minor link errors detected on one or more physical lanes (SymbolErrorCounter; "
     "counters/symbol_error)."},
    {"link_error_recovery", "ibfabric_sysfs_port_link_error_recoveries_total",
     "Times the link error recovery process completed successfully (LinkErrorRecoveryCounter; "
     "counters/link_error_recovery)."},
    {"link_downed", "ibfabric_sysfs_port_link_downed_total",
     "Times the link error recovery process failed and the link went down (LinkDownedCounter; "
     "counters/link_downed)."},
    {"port_rcv_errors", "ibfabric_sysfs_port_receive_errors_total",
     "Packets received with an error (PortRcvErrors; counters/port_rcv_errors)."},
    {"port_rcv_remote_physical_errors", "ibfabric_sysfs_port_receive_remote_physical_errors_total",
     "Packets received marked with the EBP delimiter (PortRcvRemotePhysicalErrors; "
     "counters/port_rcv_remote_physical_errors)."},
    {"port_rcv_switch_relay_errors", "ibfabric_sysfs_port_receive_switch_relay_errors_total",
     "Packets received that could not be forwarded (PortRcvSwitchRelayErrors; "
     "counters/port_rcv_switch_relay_errors)."},
    {"port_xmit_discards", "ibfabric_sysfs_port_transmit_discards_total",
     "Outbound packets discarded because the port was down or congested (PortXmitDiscards; "
     "counters/port_xmit_discards)."},
    {"port_xmit_constraint_errors", "ibfabric_sysfs_port_transmit_constraint_errors_total",
     "Outbound packets not sent because of partition or raw-packet constraints "
     "(PortXmitConstraintErrors; counters/port_xmit_constraint_errors)."},
    {"port_rcv_constraint_errors", "ibfabric_sysfs_port_receive_constraint_errors_total",
     "Inbound packets discarded because of partition or raw-packet constraints "
     "(PortRcvConstraintErrors; counters/port_rcv_constraint_errors)."},
    {"local_link_integrity_errors", "ibfabric_sysfs_port_local_link_integrity_errors_total",
     "Times local physical errors exceeded the LocalPhyErrors threshold "
     "(LocalLinkIntegrityErrors; counters/local_link_integrity_errors)."},
    {"excessive_buffer_overrun_errors", "ibfabric_sysfs_port_excessive_buffer_overrun_errors_total",
     "Times OverrunErrors consecutive flow control update periods each had a buffer overrun "
     "(ExcessiveBufferOverrunErrors; counters/excessive_buffer_overrun_errors)."},
    {"VL15_dropped", "ibfabric_sysfs_port_vl15_dropped_total",
     "Incoming VL15 (subnet management) packets dropped for lack of buffers (VL15Dropped; "
     "counters/VL15_dropped)."},
    {"port_xmit_data", "ibfabric_sysfs_port_transmit_bytes_total",
     "Bytes transmitted on all VLs, excluding link packets (PortXmitData; counters/port_xmit_data "
     "or counters_ext/port_xmit_data_64 count 4-octet words, multiplied by 4 here). On EFA "
     "hw_counters/tx_bytes, in bytes.",
     4},
    {"port_rcv_data", "ibfabric_sysfs_port_receive_bytes_total",
     "Bytes received on all VLs, excluding link packets (PortRcvData; counters/port_rcv_data "
     "or counters_ext/port_rcv_data_64 count 4-octet words, multiplied by 4 here). On EFA "
     "hw_counters/rx_bytes, in bytes.",
     4},
    {"port_xmit_packets", "ibfabric_sysfs_port_transmit_packets_total",
     "Packets transmitted on all VLs, including packets with errors (PortXmitPkts; "
     "counters/port_xmit_packets or counters_ext/port_xmit_packets_64). On EFA "
     "hw_counters/tx_pkts."},
    {"port_rcv_packets", "ibfabric_sysfs_port_receive_packets_total",
     "Packets received on all VLs, including packets with errors (PortRcvPkts; "
     "counters/port_rcv_packets or counters_ext/port_rcv_packets_64). On EFA "
     "hw_counters/rx_pkts."},
    {"port_xmit_wait", "ibfabric_sysfs_port_transmit_wait_ticks_total",
     "Ticks during which the port had data to send but sent none (PortXmitWait; "
     "counters/port_xmit_wait); the tick length is device-specific."},
    {"unicast_xmit_packets", "ibfabric_sysfs_port_unicast_transmit_packets_total",
     "Unicast packets transmitted (PortUnicastXmitPkts; counters/unicast_xmit_packets)."},
    {"unicast_rcv_packets", "ibfabric_sysfs_port_unicast_receive_packets_total",
     "Unicast packets received (PortUnicastRcvPkts; counters/unicast_rcv_packets)."},
    {"multicast_xmit_packets", "ibfabric_sysfs_port_multicast_transmit_packets_total",
     "Multicast packets transmitted (PortMulticastXmitPkts; counters/multicast_xmit_packets)."},
    {"multicast_rcv_packets", "ibfabric_sysfs_port_multicast_receive_packets_total",
     "Multicast packets received (PortMulticastRcvPkts; counters/multicast_rcv_packets)."},
};

// counters_ext/ (kernels before 4.5; legacy mlx4): the 64-bit PortCountersExtended values,
// read as node_exporter's infiniband collector reads them. Each one replaces the counters/ file
// named in `supersedes`, which on those kernels holds the saturating 32-bit PortCounters value:
// the 64-bit value wins and the 32-bit file is not read. The help texts are the counters/
// entries' (empty here: declared once).
struct LegacyCounter {
  std::string_view file;
  std::string_view supersedes;
  std::string_view metric;
  double scale = 1;
};

inline constexpr LegacyCounter kLegacyCounters[] = {
    {"port_xmit_data_64", "port_xmit_data", "ibfabric_sysfs_port_transmit_bytes_total", 4},
    {"port_rcv_data_64", "port_rcv_data", "ibfabric_sysfs_port_receive_bytes_total", 4},
    {"port_xmit_packets_64", "port_xmit_packets", "ibfabric_sysfs_port_transmit_packets_total"},
    {"port_rcv_packets_64", "port_rcv_packets", "ibfabric_sysfs_port_receive_packets_total"},
    {"port_unicast_xmit_packets", "unicast_xmit_packets",
     "ibfabric_sysfs_port_unicast_transmit_packets_total"},
    {"port_unicast_rcv_packets", "unicast_rcv_packets",
     "ibfabric_sysfs_port_unicast_receive_packets_total"},
    {"port_multicast_xmit_packets", "multicast_xmit_packets",
     "ibfabric_sysfs_port_multicast_transmit_packets_total"},
    {"port_multicast_rcv_packets", "multicast_rcv_packets",
     "ibfabric_sysfs_port_multicast_receive_packets_total"},
};

// Port hw_counters of the mlx5 driver (drivers/infiniband/hw/mlx5/counters.c) that tell
// congestion from loss on RoCE (and, for the transport ones, on InfiniBand too). A named
// counter is exported only under its name, not also as hw_stat (one value, one series).
inline constexpr NamedCounter kMellanoxHwCounters[] = {
    {"np_ecn_marked_roce_packets", "ibfabric_sysfs_port_roce_ecn_marked_packets_total",
     "RoCE packets received with an ECN Congestion Experienced mark: a switch on the path was "
     "congested (mlx5 notification point; hw_counters/np_ecn_marked_roce_packets)."},
    {"np_cnp_sent", "ibfabric_sysfs_port_roce_cnp_sent_total",
     "Congestion Notification Packets sent back to senders in answer to ECN-marked packets "
     "(mlx5 notification point; hw_counters/np_cnp_sent)."},
    {"rp_cnp_handled", "ibfabric_sysfs_port_roce_cnp_handled_total",
     "Congestion Notification Packets received and acted on by slowing this port's sending "
     "(mlx5 reaction point; hw_counters/rp_cnp_handled)."},
    {"rp_cnp_ignored", "ibfabric_sysfs_port_roce_cnp_ignored_total",
     "Congestion Notification Packets received and ignored (mlx5 reaction point; "
     "hw_counters/rp_cnp_ignored)."},
    {"roce_adp_retrans", "ibfabric_sysfs_port_roce_adaptive_retransmissions_total",
     "Adaptive retransmissions of RoCE traffic (mlx5; hw_counters/roce_adp_retrans)."},
    {"roce_adp_retrans_to", "ibfabric_sysfs_port_roce_adaptive_retransmission_timeouts_total",
     "Timeouts in RoCE traffic with adaptive retransmission enabled (mlx5; "
     "hw_counters/roce_adp_retrans_to)."},
    {"roce_slow_restart", "ibfabric_sysfs_port_roce_slow_restarts_total",
     "Times a RoCE QP went into slow restart after retransmission timeouts (mlx5; "
     "hw_counters/roce_slow_restart)."},
    {"out_of_sequence", "ibfabric_sysfs_port_out_of_sequence_packets_total",
     "Packets received out of sequence: a packet before them was lost (mlx5; "
     "hw_counters/out_of_sequence)."},
    {"packet_seq_err", "ibfabric_sysfs_port_packet_sequence_errors_total",
     "NAK sequence error responses received: the responder saw a gap in the packet sequence "
     "(mlx5; hw_counters/packet_seq_err)."},
    {"implied_nak_seq_err", "ibfabric_sysfs_port_implied_nak_sequence_errors_total",
     "Times the requester inferred a lost packet from an ACK with a later sequence number than "
     "expected (mlx5; hw_counters/implied_nak_seq_err)."},
    {"local_ack_timeout_err", "ibfabric_sysfs_port_local_ack_timeouts_total",
     "Times the ACK timer of a sending QP expired (no answer from the remote side in time; "
     "mlx5; hw_counters/local_ack_timeout_err)."},
    {"duplicate_request", "ibfabric_sysfs_port_duplicate_requests_total",
     "Duplicate requests received: the remote side retransmitted a request this port had "
     "already executed (mlx5; hw_counters/duplicate_request)."},
    {"rnr_nak_retry_err", "ibfabric_sysfs_port_rnr_nak_retries_exceeded_total",
     "Times the Receiver-Not-Ready NAK retry count was exceeded (mlx5; "
     "hw_counters/rnr_nak_retry_err)."},
    {"out_of_buffer", "ibfabric_sysfs_port_out_of_buffer_drops_total",
     "Packets dropped because no receive WQE was posted for their QP (mlx5; "
     "hw_counters/out_of_buffer)."},
    {"req_cqe_error", "ibfabric_sysfs_port_requester_completion_errors_total",
     "Requester work completions with an error (mlx5; hw_counters/req_cqe_error)."},
    {"resp_cqe_error", "ibfabric_sysfs_port_responder_completion_errors_total",
     "Responder work completions with an error (mlx5; hw_counters/resp_cqe_error)."},
    {"rx_icrc_encapsulated", "ibfabric_sysfs_port_roce_icrc_errors_total",
     "RoCE packets received with an invalid ICRC (mlx5; hw_counters/rx_icrc_encapsulated)."},
};

// Port hw_counters of the efa driver (drivers/infiniband/hw/efa/efa_verbs.c,
// EFA_DEFINE_PORT_STATS). EFA has no counters/ directory: its traffic counts (bytes, not
// 4-octet words) are exported under the InfiniBand ports' names so dashboards work unchanged.
// Those four have empty help here: they are declared with the counters/ table.
inline constexpr NamedCounter kEfaHwCounters[] = {
    {"tx_bytes", "ibfabric_sysfs_port_transmit_bytes_total", ""},
    {"rx_bytes", "ibfabric_sysfs_port_receive_bytes_total", ""},
    {"tx_pkts", "ibfabric_sysfs_port_transmit_packets_total", ""},
    {"rx_pkts", "ibfabric_sysfs_port_receive_packets_total", ""},
    {"rx_drops", "ibfabric_sysfs_port_efa_receive_drops_total",
     "Packets the EFA device dropped on receive (efa; hw_counters/rx_drops)."},
    {"send_bytes", "ibfabric_sysfs_port_efa_send_bytes_total",
     "Bytes of SEND work requests posted (efa; hw_counters/send_bytes)."},
    {"send_wrs", "ibfabric_sysfs_port_efa_send_work_requests_total",
     "SEND work requests posted (efa; hw_counters/send_wrs)."},
    {"recv_bytes", "ibfabric_sysfs_port_efa_recv_bytes_total",
     "Bytes received by RECV work requests (efa; hw_counters/recv_bytes)."},
    {"recv_wrs", "ibfabric_sysfs_port_efa_recv_work_requests_total",
     "RECV work requests completed (efa; hw_counters/recv_wrs)."},
    {"rdma_read_wrs", "ibfabric_sysfs_port_efa_rdma_read_work_requests_total",
     "RDMA read work requests posted (efa; hw_counters/rdma_read_wrs)."},
    {"rdma_read_bytes", "ibfabric_sysfs_port_efa_rdma_read_bytes_total",
     "Bytes read from remote memory by RDMA read (efa; hw_counters/rdma_read_bytes)."},
    {"rdma_read_wr_err", "ibfabric_sysfs_port_efa_rdma_read_work_request_errors_total",
     "RDMA read work requests that failed (efa; hw_counters/rdma_read_wr_err)."},
    {"rdma_read_resp_bytes", "ibfabric_sysfs_port_efa_rdma_read_response_bytes_total",
     "Bytes sent in answer to remote RDMA reads of this device's memory (efa; "
     "hw_counters/rdma_read_resp_bytes)."},
    {"rdma_write_wrs", "ibfabric_sysfs_port_efa_rdma_write_work_requests_total",
     "RDMA write work requests posted (efa; hw_counters/rdma_write_wrs)."},
    {"rdma_write_bytes", "ibfabric_sysfs_port_efa_rdma_write_bytes_total",
     "Bytes written to remote memory by RDMA write (efa; hw_counters/rdma_write_bytes)."},
    {"rdma_write_wr_err", "ibfabric_sysfs_port_efa_rdma_write_work_request_errors_total",
     "RDMA write work requests that failed (efa; hw_counters/rdma_write_wr_err)."},
    {"rdma_write_recv_bytes", "ibfabric_sysfs_port_efa_rdma_write_received_bytes_total",
     "Bytes written into this device's memory by remote RDMA writes (efa; "
     "hw_counters/rdma_write_recv_bytes)."},
    {"retrans_bytes", "ibfabric_sysfs_port_efa_retransmitted_bytes_total",
     "Bytes the EFA device's reliable transport sent again (efa; hw_counters/retrans_bytes)."},
    {"retrans_pkts", "ibfabric_sysfs_port_efa_retransmitted_packets_total",
     "Packets the EFA device's reliable transport sent again (efa; hw_counters/retrans_pkts)."},
    {"retrans_timeout_events", "ibfabric_sysfs_port_efa_retransmit_timeouts_total",
     "Retransmission timeouts of the reliable transport (efa; "
     "hw_counters/retrans_timeout_events)."},
    {"unresponsive_remote_events", "ibfabric_sysfs_port_efa_unresponsive_remote_events_total",
     "Times a remote peer stopped answering the reliable transport (efa; "
     "hw_counters/unresponsive_remote_events)."},
    {"impaired_remote_conn_events",
     "ibfabric_sysfs_port_efa_impaired_remote_connection_events_total",
     "Times a connection to a remote peer was found impaired (degraded, not lost) (efa; "
     "hw_counters/impaired_remote_conn_events)."},
};

// Which driver's hw_counters names a device's files follow, from its PCI vendor.
enum class Driver { other, mellanox, efa };

template <std::size_t N>
const NamedCounter* find_named(const NamedCounter (&table)[N], std::string_view file) {
  for (const auto& counter : table) {
    if (counter.file == file) return &counter;
  }
  return nullptr;
}

inline const NamedCounter* named_counter(std::string_view file) {
  return find_named(kNamedCounters, file);
}

inline const LegacyCounter* legacy_counter(std::string_view file) {
  for (const auto& counter : kLegacyCounters) {
    if (counter.file == file) return &counter;
  }
  return nullptr;
}

}  // namespace ibfabric::sysfs
