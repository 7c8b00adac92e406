// The sysfs collector run on the fixture trees in tests/fixtures/sysfs. Every expected value
// below was worked out by hand from the fixture files (data counters: the file's 4-octet words
// times 4), not copied from the collector's output.

#include "collectors/sysfs/sysfs_collector.h"

#include "tests/unit/collector_test_support.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ibfabric::sysfs {
namespace {

using namespace ibfabric::test_support;

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(IBFABRIC_SOURCE_DIR) + "/tests/fixtures/sysfs/" + name;
}

// Builds the collector the way the daemon does: through its spec and a config section.
std::unique_ptr<Collector> make(const std::string& root, const std::string& yaml = "") {
  boost::asio::io_context io;
  CollectorContext context{io, root, {}};
  ConfigSection section(yaml.empty() ? YAML::Node() : YAML::Load(yaml), "test.yaml",
                        "collectors.sysfs");
  return spec().create(context, section);
}

const Labels kMlx5_0Port1{{"device", "mlx5_0"}, {"port", "1"}};

// The 21 standard counter files and their metrics.
const std::vector<std::pair<std::string, std::string>> kNamed = {
    {"symbol_error", "ibfabric_sysfs_port_symbol_errors_total"},
    {"link_error_recovery", "ibfabric_sysfs_port_link_error_recoveries_total"},
    {"link_downed", "ibfabric_sysfs_port_link_downed_total"},
    {"port_rcv_errors", "ibfabric_sysfs_port_receive_errors_total"},
    {"port_rcv_remote_physical_errors", "ibfabric_sysfs_port_receive_remote_physical_errors_total"},
    {"port_rcv_switch_relay_errors", "ibfabric_sysfs_port_receive_switch_relay_errors_total"},
    {"port_xmit_discards", "ibfabric_sysfs_port_transmit_discards_total"},
    {"port_xmit_constraint_errors", "ibfabric_sysfs_port_transmit_constraint_errors_total"},
    {"port_rcv_constraint_errors", "ibfabric_sysfs_port_receive_constraint_errors_total"},
    {"local_link_integrity_errors", "ibfabric_sysfs_port_local_link_integrity_errors_total"},
    {"excessive_buffer_overrun_errors",
     "ibfabric_sysfs_port_excessive_buffer_overrun_errors_total"},
    {"VL15_dropped", "ibfabric_sysfs_port_vl15_dropped_total"},
    {"port_xmit_data", "ibfabric_sysfs_port_transmit_bytes_total"},
    {"port_rcv_data", "ibfabric_sysfs_port_receive_bytes_total"},
    {"port_xmit_packets", "ibfabric_sysfs_port_transmit_packets_total"},
    {"port_rcv_packets", "ibfabric_sysfs_port_receive_packets_total"},
    {"port_xmit_wait", "ibfabric_sysfs_port_transmit_wait_ticks_total"},
    {"unicast_xmit_packets", "ibfabric_sysfs_port_unicast_transmit_packets_total"},
    {"unicast_rcv_packets", "ibfabric_sysfs_port_unicast_receive_packets_total"},
    {"multicast_xmit_packets", "ibfabric_sysfs_port_multicast_transmit_packets_total"},
    {"multicast_rcv_packets", "ibfabric_sysfs_port_multicast_receive_packets_total"},
};

std::string metric_of(const std::string& file) {
  for (const auto& [f, metric] : kNamed) {
    if (f == file) return metric;
  }
  ADD_FAILURE() << "no metric for " << file;
  return "";
}

void expect_counters(const MetricFamilies& m, const Labels& port,
                     const std::map<std::string, double>& expected) {
  for (const auto& [file, want] : expected) {
    EXPECT_EQ(value(m, metric_of(file), port), want) << file;
  }
}

// The mlx5 port hw_counters with a metric of their own (docs/collectors.md, "RoCE and mlx5
// transport"); they are not also exported as hw_stat.
const std::map<std::string, std::string> kMlx5Named = {
    {"np_ecn_marked_roce_packets", "ibfabric_sysfs_port_roce_ecn_marked_packets_total"},
    {"np_cnp_sent", "ibfabric_sysfs_port_roce_cnp_sent_total"},
    {"rp_cnp_handled", "ibfabric_sysfs_port_roce_cnp_handled_total"},
    {"rp_cnp_ignored", "ibfabric_sysfs_port_roce_cnp_ignored_total"},
    {"roce_adp_retrans", "ibfabric_sysfs_port_roce_adaptive_retransmissions_total"},
    {"roce_adp_retrans_to", "ibfabric_sysfs_port_roce_adaptive_retransmission_timeouts_total"},
    {"roce_slow_restart", "ibfabric_sysfs_port_roce_slow_restarts_total"},
    {"out_of_sequence", "ibfabric_sysfs_port_out_of_sequence_packets_total"},
    {"packet_seq_err", "ibfabric_sysfs_port_packet_sequence_errors_total"},
    {"implied_nak_seq_err", "ibfabric_sysfs_port_implied_nak_sequence_errors_total"},
    {"local_ack_timeout_err", "ibfabric_sysfs_port_local_ack_timeouts_total"},
    {"duplicate_request", "ibfabric_sysfs_port_duplicate_requests_total"},
    {"rnr_nak_retry_err", "ibfabric_sysfs_port_rnr_nak_retries_exceeded_total"},
    {"out_of_buffer", "ibfabric_sysfs_port_out_of_buffer_drops_total"},
    {"req_cqe_error", "ibfabric_sysfs_port_requester_completion_errors_total"},
    {"resp_cqe_error", "ibfabric_sysfs_port_responder_completion_errors_total"},
    {"rx_icrc_encapsulated", "ibfabric_sysfs_port_roce_icrc_errors_total"},
};

// Every file of a port's hw_counters: under its own metric when `named` has it, else as
// hw_stat{counter=FILE}; and nothing else in hw_stat.
void expect_hw(const MetricFamilies& m, const Labels& port,
               const std::map<std::string, double>& expected,
               const std::map<std::string, std::string>& named = {}) {
  Labels labels = port;
  std::size_t generic = 0;
  for (const auto& [counter, want] : expected) {
    if (auto it = named.find(counter); it != named.end()) {
      EXPECT_EQ(value(m, it->second, port), want) << counter;
      labels = port;
      labels.emplace_back("counter", counter);
      EXPECT_FALSE(value(m, "ibfabric_sysfs_port_hw_stat_total", labels)) << counter;
      continue;
    }
    ++generic;
    labels = port;
    labels.emplace_back("counter", counter);
    EXPECT_EQ(value(m, "ibfabric_sysfs_port_hw_stat_total", labels), want) << counter;
  }
  EXPECT_EQ(samples(m, "ibfabric_sysfs_port_hw_stat_total", port).size(), generic);
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// ------------------------------------------------------------------------------------------

TEST(SysfsCollector, SpecIsSysfsEnabledEvery15s) {
  auto s = spec();
  EXPECT_EQ(s.name, "sysfs");
  EXPECT_TRUE(s.enabled_by_default);
  EXPECT_EQ(s.default_interval, std::chrono::seconds(15));
}

TEST(SysfsCollector, ConnectX7OnNdr) {
  auto collector = make(fixture("cx7-ndr"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;

  EXPECT_EQ(info(m, "ibfabric_sysfs_device_info", {{"device", "mlx5_0"}}),
            (std::map<std::string, std::string>{{"device", "mlx5_0"},
                                                {"node_guid", "0x0c42a1030065ab12"},
                                                {"system_image_guid", "0x0c42a1030065ab12"},
                                                {"firmware_version", "28.39.1002"},
                                                {"board_id", "MT_0000000838"},
                                                {"hca_type", "MT4129"},
                                                {"node_description", "gpu-node-017 HCA-1"},
                                                {"node_type", "CA"},
                                                {"pci_address", "0000:17:00.0"}}));
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", kMlx5_0Port1),
            (std::map<std::string, std::string>{{"device", "mlx5_0"},
                                                {"port", "1"},
                                                {"link_layer", "InfiniBand"},
                                                {"state", "ACTIVE"},
                                                {"physical_state", "LinkUp"},
                                                {"link_width", "4X"},
                                                {"link_speed", "NDR"}}));
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_state", kMlx5_0Port1), 4);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_physical_state", kMlx5_0Port1), 5);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", kMlx5_0Port1), 50e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_link_width_lanes", kMlx5_0Port1), 4);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", kMlx5_0Port1), 418);  // 0x1a2
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_sm_lid", kMlx5_0Port1), 1);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_sm_sl", kMlx5_0Port1), 0);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lmc", kMlx5_0Port1), 0);

  expect_counters(m, kMlx5_0Port1,
                  {{"symbol_error", 3},
                   {"link_error_recovery", 1},
                   {"link_downed", 2},
                   {"port_rcv_errors", 17},
                   {"port_rcv_remote_physical_errors", 4},
                   {"port_rcv_switch_relay_errors", 5},
                   {"port_xmit_discards", 45},
                   {"port_xmit_constraint_errors", 6},
                   {"port_rcv_constraint_errors", 7},
                   {"local_link_integrity_errors", 8},
                   {"excessive_buffer_overrun_errors", 9},
                   {"VL15_dropped", 11},
                   {"port_xmit_data", 4938271560492},  // 1234567890123 words
                   {"port_rcv_data", 3950617284392},   // 987654321098 words
                   {"port_xmit_packets", 24680135790},
                   {"port_rcv_packets", 13579246801},
                   {"port_xmit_wait", 555555555},
                   {"unicast_xmit_packets", 24680000001},
                   {"unicast_rcv_packets", 13579000002},
                   {"multicast_xmit_packets", 135789},
                   {"multicast_rcv_packets", 244799}});
  // Every file in counters/ has a name of its own here.
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_pma_stat_total").empty());

  expect_hw(m, kMlx5_0Port1,
            {{"rx_write_requests", 5000000123},
             {"rx_read_requests", 66120},
             {"rx_atomic_requests", 301},
             {"rx_dct_connect", 12},
             {"out_of_buffer", 4211},
             {"out_of_sequence", 57},
             {"duplicate_request", 23},
             {"rnr_nak_retry_err", 2},
             {"packet_seq_err", 9},
             {"implied_nak_seq_err", 14},
             {"local_ack_timeout_err", 6},
             {"resp_local_length_error", 1},
             {"resp_cqe_error", 3},
             {"req_cqe_error", 5},
             {"req_remote_invalid_request", 4},
             {"req_remote_access_errors", 8},
             {"resp_remote_access_errors", 7},
             {"resp_cqe_flush_error", 110},
             {"req_cqe_flush_error", 120},
             {"roce_adp_retrans", 31},
             {"roce_adp_retrans_to", 13},
             {"roce_slow_restart", 15},
             {"roce_slow_restart_cnps", 16},
             {"roce_slow_restart_trans", 17},
             {"rp_cnp_ignored", 18},
             {"rp_cnp_handled", 19},
             {"np_ecn_marked_roce_packets", 20},
             {"np_cnp_sent", 21},
             {"rx_icrc_encapsulated", 22}},
            kMlx5Named);
  // 4X NDR: 4 lanes of 100 Gb/s after encoding = 400 Gb/s.
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_effective_rate_bytes_per_second", kMlx5_0Port1), 50e9);
  // lifespan is the driver's cache time, not a counter.
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_hw_stat_total", {{"counter", "lifespan"}}).empty());
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_device_hw_stat_total").empty());

  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", kMlx5_0Port1), 0);
  auto device_errors = samples(m, "ibfabric_sysfs_read_errors_total", {{"device", "mlx5_0"}});
  ASSERT_EQ(device_errors.size(), 2u);  // the device's own files, and port 1
}

TEST(SysfsCollector, RoceAndSoftRoceWithoutPma) {
  auto collector = make(fixture("roce"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels mlx{{"device", "mlx5_1"}, {"port", "1"}};
  const Labels rxe{{"device", "rxe0"}, {"port", "1"}};

  EXPECT_EQ(samples(m, "ibfabric_sysfs_device_info").size(), 2u);
  auto mlx_info = info(m, "ibfabric_sysfs_device_info", {{"device", "mlx5_1"}});
  EXPECT_EQ(mlx_info["node_guid"], "0x1070fd0300c23e4f");
  EXPECT_EQ(mlx_info["system_image_guid"], "0x1070fd0300c23e4e");
  EXPECT_EQ(mlx_info["hca_type"], "MT4125");
  EXPECT_EQ(mlx_info["pci_address"], "0000:3b:00.1");

  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", mlx),
            (std::map<std::string, std::string>{{"device", "mlx5_1"},
                                                {"port", "1"},
                                                {"link_layer", "Ethernet"},
                                                {"state", "ACTIVE"},
                                                {"physical_state", "LinkUp"},
                                                {"link_width", "2X"},
                                                {"link_speed", "HDR"}}));
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", mlx), 12.5e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_link_width_lanes", mlx), 2);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", mlx), 0);
  expect_counters(m, mlx,
                  {{"link_downed", 1},
                   {"symbol_error", 0},
                   {"port_xmit_data", 294967296004},  // 73741824001 words
                   {"port_rcv_data", 209715200012},   // 52428800003 words
                   {"port_xmit_packets", 91234567},
                   {"port_rcv_packets", 81234568},
                   {"unicast_xmit_packets", 91230000},
                   {"unicast_rcv_packets", 81230000},
                   {"multicast_xmit_packets", 4567},
                   {"multicast_rcv_packets", 4568}});
  // The congestion and transport counters under their own names (values from the fixture).
  expect_hw(m, mlx,
            {{"roce_slow_restart_cnps", 0},
             {"resp_cqe_error", 0},
             {"rx_dct_connect", 0},
             {"np_cnp_sent", 3401},
             {"np_ecn_marked_roce_packets", 3502},
             {"rx_read_requests", 1048583},
             {"out_of_buffer", 77},
             {"req_remote_access_errors", 0},
             {"duplicate_request", 3},
             {"rp_cnp_handled", 2210},
             {"local_ack_timeout_err", 2},
             {"rnr_nak_retry_err", 0},
             {"rx_write_requests", 7340032},
             {"resp_cqe_flush_error", 0},
             {"out_of_sequence", 29},
             {"rx_atomic_requests", 0},
             {"roce_slow_restart_trans", 0},
             {"roce_adp_retrans_to", 5},
             {"implied_nak_seq_err", 0},
             {"packet_seq_err", 11},
             {"resp_local_length_error", 0},
             {"rp_cnp_ignored", 3},
             {"roce_slow_restart", 0},
             {"req_remote_invalid_request", 0},
             {"req_cqe_error", 0},
             {"resp_remote_access_errors", 0},
             {"roce_adp_retrans", 41},
             {"req_cqe_flush_error", 0},
             {"rx_icrc_encapsulated", 0}},
            kMlx5Named);
  // Ethernet: the kernel's "100 Gb/sec (2X HDR)" is already the data rate of the 100GbE link.
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_effective_rate_bytes_per_second", mlx), 12.5e9);
  // rxe is no PCI device: its duplicate_request and out_of_sequence stay hw_stat.

  // Soft-RoCE: a virtual device with no PCI link, no board_id or hca_type, an empty fw_ver,
  // and "N/A (no PMA)" in every counters/ file, which is "not there" rather than an error.
  EXPECT_EQ(info(m, "ibfabric_sysfs_device_info", {{"device", "rxe0"}}),
            (std::map<std::string, std::string>{{"device", "rxe0"},
                                                {"node_guid", "0x505400fffe123456"},
                                                {"system_image_guid", "0x505400fffe123456"},
                                                {"firmware_version", ""},
                                                {"board_id", ""},
                                                {"hca_type", ""},
                                                {"node_description", "rxe"},
                                                {"node_type", "CA"},
                                                {"pci_address", ""}}));
  auto rxe_port = info(m, "ibfabric_sysfs_port_info", rxe);
  EXPECT_EQ(rxe_port["link_width"], "1X");
  EXPECT_EQ(rxe_port["link_speed"], "SDR");  // "2.5 Gb/sec (1X)" names no speed
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", rxe), 312500000);
  for (const auto& [file, metric] : kNamed) {
    EXPECT_TRUE(samples(m, metric, rxe).empty()) << metric;
  }
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_pma_stat_total", rxe).empty());
  expect_hw(m, rxe,
            {{"sent_pkts", 120034},
             {"rcvd_pkts", 119876},
             {"duplicate_request", 0},
             {"out_of_sequence", 2},
             {"rcvd_rnr_err", 0},
             {"send_rnr_err", 0},
             {"rcvd_seq_err", 1},
             {"ack_deferred", 3},
             {"retry_exceeded_err", 0},
             {"retry_rnr_exceeded_err", 0},
             {"completer_retry_err", 4},
             {"send_err", 0}});
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", rxe), 0);
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", mlx), 0);
}

TEST(SysfsCollector, PortDownAndPolling) {
  auto collector = make(fixture("down-polling"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_state", kMlx5_0Port1), 1);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_physical_state", kMlx5_0Port1), 2);
  auto port = info(m, "ibfabric_sysfs_port_info", kMlx5_0Port1);
  EXPECT_EQ(port["state"], "DOWN");
  EXPECT_EQ(port["physical_state"], "Polling");
  EXPECT_EQ(port["link_width"], "4X");
  EXPECT_EQ(port["link_speed"], "SDR");
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", kMlx5_0Port1), 1.25e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", kMlx5_0Port1), 65535);  // 0xffff
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_sm_lid", kMlx5_0Port1), 0);
  expect_counters(m, kMlx5_0Port1,
                  {{"symbol_error", 12},
                   {"link_downed", 5},
                   {"port_rcv_errors", 1},
                   {"port_xmit_discards", 230},
                   {"local_link_integrity_errors", 2},
                   {"port_xmit_data", 352004},  // 88001 words
                   {"port_rcv_data", 364008},   // 91002 words
                   {"port_xmit_wait", 40960}});
  EXPECT_EQ(info(m, "ibfabric_sysfs_device_info", {{"device", "mlx5_0"}})["hca_type"], "MT4123");
}

TEST(SysfsCollector, TwoPortsOfOneDeviceStayApart) {
  auto collector = make(fixture("two-port"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels p1{{"device", "mlx4_0"}, {"port", "1"}};
  const Labels p2{{"device", "mlx4_0"}, {"port", "2"}};

  EXPECT_EQ(samples(m, "ibfabric_sysfs_device_info").size(), 1u);
  EXPECT_EQ(samples(m, "ibfabric_sysfs_port_info").size(), 2u);
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p1)["link_layer"], "InfiniBand");
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p1)["link_speed"], "FDR");
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p2)["link_layer"], "Ethernet");
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p2)["link_speed"], "QDR");
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", p1), 7e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", p2), 5e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", p1), 8);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lmc", p1), 2);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", p2), 0);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lmc", p2), 0);

  expect_counters(m, p1,
                  {{"symbol_error", 21},
                   {"link_error_recovery", 22},
                   {"link_downed", 23},
                   {"port_rcv_errors", 24},
                   {"local_link_integrity_errors", 10},
                   {"excessive_buffer_overrun_errors", 11},
                   {"VL15_dropped", 30},
                   {"port_xmit_data", 17179869184},  // 2^32 words
                   {"port_rcv_data", 17179869188},   // 2^32 + 1 words
                   {"port_xmit_wait", 33000003},
                   {"multicast_rcv_packets", 37007}});
  expect_counters(m, p2,
                  {{"symbol_error", 41},
                   {"link_error_recovery", 42},
                   {"link_downed", 43},
                   {"port_rcv_errors", 44},
                   {"local_link_integrity_errors", 12},
                   {"excessive_buffer_overrun_errors", 13},
                   {"VL15_dropped", 50},
                   {"port_xmit_data", 204000000204},  // 51000000051 words
                   {"port_rcv_data", 208000000208},   // 52000000052 words
                   {"port_xmit_wait", 55000055},
                   {"multicast_rcv_packets", 59059}});
  Labels hw1 = p1;
  hw1.emplace_back("counter", "rq_num_lle");
  Labels hw2 = p2;
  hw2.emplace_back("counter", "sq_num_to");
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_hw_stat_total", hw1), 100);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_hw_stat_total", hw2), 222);
  EXPECT_EQ(samples(m, "ibfabric_sysfs_port_hw_stat_total", p1).size(), 23u);
  EXPECT_EQ(samples(m, "ibfabric_sysfs_port_hw_stat_total", p2).size(), 23u);
}

TEST(SysfsCollector, BrokenFilesCostOnlyTheirOwnValues) {
  LogCapture log;
  auto collector = make(fixture("broken"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;

  // node_guid is garbled: only that label is lost.
  auto device = info(m, "ibfabric_sysfs_device_info", {{"device", "mlx5_0"}});
  EXPECT_EQ(device["node_guid"], "");
  EXPECT_EQ(device["system_image_guid"], "0x0c42a1030065ab12");
  EXPECT_EQ(device["firmware_version"], "28.39.1002");
  EXPECT_EQ(device["node_description"], "gpu-node-099 HCA-1");

  // state is garbled and rate is missing; phys_state, lid and the rest stay.
  auto port = info(m, "ibfabric_sysfs_port_info", kMlx5_0Port1);
  EXPECT_EQ(port["state"], "");
  EXPECT_EQ(port["physical_state"], "LinkUp");
  EXPECT_EQ(port["link_width"], "");
  EXPECT_EQ(port["link_layer"], "InfiniBand");
  EXPECT_FALSE(value(m, "ibfabric_sysfs_port_state", kMlx5_0Port1));
  EXPECT_FALSE(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", kMlx5_0Port1));
  EXPECT_FALSE(value(m, "ibfabric_sysfs_port_link_width_lanes", kMlx5_0Port1));
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_physical_state", kMlx5_0Port1), 5);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lid", kMlx5_0Port1), 43);  // 0x2b
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_sm_lid", kMlx5_0Port1), 1);

  // symbol_error "twelve", port_rcv_errors empty, link_downed a directory, port_xmit_discards
  // a dangling symlink: those four are absent, the other 17 are there.
  for (const char* lost :
       {"symbol_error", "port_rcv_errors", "link_downed", "port_xmit_discards"}) {
    EXPECT_FALSE(value(m, metric_of(lost), kMlx5_0Port1)) << lost;
  }
  expect_counters(m, kMlx5_0Port1,
                  {{"link_error_recovery", 1},
                   {"port_rcv_remote_physical_errors", 4},
                   {"port_rcv_switch_relay_errors", 5},
                   {"port_xmit_constraint_errors", 7},
                   {"port_rcv_constraint_errors", 8},
                   {"local_link_integrity_errors", 9},
                   {"excessive_buffer_overrun_errors", 10},
                   {"VL15_dropped", 11},
                   {"port_xmit_data", 4000},
                   {"port_rcv_data", 8000},
                   {"port_xmit_packets", 3000},
                   {"port_rcv_packets", 4000},
                   {"port_xmit_wait", 5000},
                   {"unicast_xmit_packets", 6000},
                   {"unicast_rcv_packets", 7000},
                   {"multicast_xmit_packets", 8000},
                   {"multicast_rcv_packets", 9000}});
  // out_of_buffer holds 2^64, one more than a counter can: lost; the other five stay.
  expect_hw(m, kMlx5_0Port1,
            {{"rx_write_requests", 1000},
             {"rx_read_requests", 1001},
             {"rx_atomic_requests", 1002},
             {"rx_dct_connect", 1003},
             {"out_of_sequence", 1005}},
            kMlx5Named);
  EXPECT_FALSE(value(m, "ibfabric_sysfs_port_out_of_buffer_drops_total", kMlx5_0Port1));

  // Errors: port 1 has 7 bad files (state, rate, 4 counters, 1 hw counter); mlx5_0's own
  // node_guid is 1; mlx5_1's class link dangles: 1, and it has no other metrics.
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", kMlx5_0Port1), 7);
  auto device_errors = [&](const std::string& name) -> std::optional<double> {
    for (const auto* s : samples(m, "ibfabric_sysfs_read_errors_total", {{"device", name}})) {
      if (label_map(*s).count("port") == 0) return s->counter.value;
    }
    return std::nullopt;
  };
  EXPECT_EQ(device_errors("mlx5_0"), 1);
  EXPECT_EQ(device_errors("mlx5_1"), 1);
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_device_info", {{"device", "mlx5_1"}}).empty());

  auto lines = log.take();
  EXPECT_EQ(count_containing(lines, "warning sysfs: cannot use file="), 9u);
  EXPECT_EQ(count_containing(lines,
                             "ports/1/state error=\"cannot parse: expected N: NAME, got "
                             "'ACTIVE'\""),
            1u);
  EXPECT_EQ(count_containing(lines, "ports/1/rate error=\"missing\""), 1u);
  EXPECT_EQ(count_containing(lines, "counters/link_downed error=\"cannot read: Is a directory\""),
            1u);
  EXPECT_EQ(count_containing(lines,
                             "counters/port_xmit_discards error=\"missing (dangling "
                             "symlink)\""),
            1u);

  // The second collection counts the same files again but does not log them again.
  auto again = collect(*collector);
  EXPECT_EQ(value(again.metrics, "ibfabric_sysfs_read_errors_total", kMlx5_0Port1), 14);
  EXPECT_TRUE(log.take().empty());
}

TEST(SysfsCollector, ARepairedFileIsLoggedAsGoodAndStopsCounting) {
  TempDir tmp;
  fs::copy(fixture("broken"), tmp.path(),
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  LogCapture log;
  auto collector = make(tmp.path());
  collect(*collector);
  log.take();

  const fs::path port = fs::path(tmp.path()) / "class/infiniband/mlx5_0/ports/1";
  write(port / "state", "4: ACTIVE\n");
  write(port / "rate", "400 Gb/sec (4X NDR)\n");
  auto result = collect(*collector);
  const auto& m = result.metrics;
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_state", kMlx5_0Port1), 4);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", kMlx5_0Port1), 50e9);
  // 7 in the first collection, 5 still bad in the second.
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", kMlx5_0Port1), 12);
  auto lines = log.take();
  EXPECT_EQ(count_containing(lines, "info sysfs: file is good again"), 2u);
  EXPECT_EQ(count_containing(lines, "warning"), 0u);

  // Broken again: logged again.
  write(port / "state", "garbage\n");
  collect(*collector);
  EXPECT_EQ(count_containing(log.take(), "ports/1/state error="), 1u);
}

TEST(SysfsCollector, MissingClassDirectoryFailsWithAHint) {
  TempDir tmp;
  auto collector = make(tmp.path());
  auto result = collect(*collector);
  EXPECT_FALSE(result.success);
  EXPECT_EQ(result.error, "no InfiniBand devices: " + tmp.path() +
                              "/class/infiniband does not exist; is the driver loaded? use "
                              "--sysfs-root to point elsewhere");
}

TEST(SysfsCollector, EmptyClassDirectorySucceedsWithNoPorts) {
  TempDir tmp;
  fs::create_directories(fs::path(tmp.path()) / "class/infiniband");
  auto collector = make(tmp.path());
  auto result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sysfs_device_info").empty());
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sysfs_port_info").empty());
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sysfs_read_errors_total").empty());
  // The families are still declared, so their HELP and TYPE are always there.
  EXPECT_NE(family(result.metrics, "ibfabric_sysfs_port_transmit_bytes_total"), nullptr);
}

TEST(SysfsCollector, DevicesKeyRestrictsTheDevices) {
  LogCapture log;
  auto collector = make(fixture("roce"), "devices: [rxe0, mlx5_9]");
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  EXPECT_EQ(samples(result.metrics, "ibfabric_sysfs_device_info").size(), 1u);
  EXPECT_EQ(samples(result.metrics, "ibfabric_sysfs_device_info", {{"device", "rxe0"}}).size(), 1u);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sysfs_port_info", {{"device", "mlx5_1"}}).empty());
  EXPECT_EQ(count_containing(log.take(), "configured device not found device=mlx5_9"), 1u);
  collect(*collector);
  EXPECT_TRUE(log.take().empty());
}

TEST(SysfsCollector, ConfigErrorsNameTheKey) {
  TempDir tmp;
  EXPECT_THROW(make(tmp.path(), "colour: blue"), ConfigError);
  EXPECT_THROW(make(tmp.path(), "devices: mlx5_0"), ConfigError);
  try {
    make(tmp.path(), "devices: [\"../mlx5_0\"]");
    FAIL() << "a path is not a device name";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("collectors.sysfs.devices"), std::string::npos)
        << e.what();
  }
}

// No fixture has device-level hw_counters (mlx5 has them only in switchdev mode, hfi1 and efa
// always): a minimal tree here, laid out as the kernel does it.
TEST(SysfsCollector, DeviceLevelHwCountersAndValuesBeyondDoublePrecision) {
  TempDir tmp;
  const fs::path root = tmp.path();
  const fs::path dev = root / "devices/pci0000:00/0000:00:06.0/infiniband/efa_0";
  fs::create_directories(root / "class/infiniband");
  fs::create_directory_symlink("../../devices/pci0000:00/0000:00:06.0/infiniband/efa_0",
                               root / "class/infiniband/efa_0");
  write(dev / "node_type", "7: unspecified\n");
  write(dev / "node_guid", "0000:0000:0000:0000\n");
  write(dev / "sys_image_guid", "0000:0000:0000:0000\n");
  write(dev / "fw_ver", "0.0.0.0\n");
  write(dev / "node_desc", "\n");
  write(dev / "hw_counters/submitted_cmds", "8812\n");
  write(dev / "hw_counters/cmds_err", "5\n");
  write(dev / "hw_counters/lifespan", "10\n");
  const fs::path port = dev / "ports/1";
  write(port / "state", "4: ACTIVE\n");
  write(port / "phys_state", "5: LinkUp\n");
  write(port / "rate", "100 Gb/sec (4X EDR)\n");
  write(port / "lid", "0x0\n");
  write(port / "sm_lid", "0x0\n");
  write(port / "sm_sl", "0\n");
  write(port / "lid_mask_count", "0\n");
  write(port / "cap_mask", "0x00000000\n");
  write(port / "link_layer", "Unknown\n");
  // 2^62 words: 2^64 bytes, which wraps to 0 in uint64 arithmetic.
  write(port / "counters/port_xmit_data", "4611686018427387904\n");
  // 2^53 + 1 is the first integer a double cannot hold: it becomes 2^53.
  write(port / "counters/port_rcv_packets", "9007199254740993\n");
  write(port / "counters/port_rcv_discards", "77\n");  // not a kernel file: the generic family

  auto collector = make(root.string());
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels p{{"device", "efa_0"}, {"port", "1"}};
  EXPECT_EQ(value(m, "ibfabric_sysfs_device_hw_stat_total",
                  {{"device", "efa_0"}, {"counter", "submitted_cmds"}}),
            8812);
  EXPECT_EQ(value(m, "ibfabric_sysfs_device_hw_stat_total",
                  {{"device", "efa_0"}, {"counter", "cmds_err"}}),
            5);
  EXPECT_EQ(samples(m, "ibfabric_sysfs_device_hw_stat_total").size(), 2u);
  for (const auto* s : samples(m, "ibfabric_sysfs_device_hw_stat_total")) {
    EXPECT_EQ(label_map(*s).count("port"), 0u);
  }
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p)["link_layer"], "Unknown");
  auto device = info(m, "ibfabric_sysfs_device_info", {{"device", "efa_0"}});
  EXPECT_EQ(device["node_type"], "unspecified");
  EXPECT_EQ(device["node_description"], "");
  EXPECT_EQ(device["pci_address"], "");  // this tree has no device link

  EXPECT_EQ(value(m, "ibfabric_sysfs_port_transmit_bytes_total", p), 18446744073709551616.0);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_receive_packets_total", p), 9007199254740992.0);
  Labels other = p;
  other.emplace_back("counter", "port_rcv_discards");
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_pma_stat_total", other), 77);
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", p), 0);
}

// An AWS EFA device (tests/fixtures/sysfs/efa): PCI vendor 0x1d0f, no counters/, its traffic in
// ports/1/hw_counters in bytes (no x4) under the InfiniBand ports' names.
TEST(SysfsCollector, EfaTrafficUnderThePortNamesAndItsOwnCounters) {
  auto collector = make(fixture("efa"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels p{{"device", "rdmap16s27"}, {"port", "1"}};
  EXPECT_EQ(info(m, "ibfabric_sysfs_device_info", {{"device", "rdmap16s27"}}),
            (std::map<std::string, std::string>{{"device", "rdmap16s27"},
                                                {"node_guid", "0x0e8d4fd0ed0fbf2e"},
                                                {"system_image_guid", "0x0000000000000000"},
                                                {"firmware_version", ""},
                                                {"board_id", ""},
                                                {"hca_type", ""},
                                                {"node_description", "ip-10-1-2-17 rdmap16s27"},
                                                {"node_type", "unspecified"},
                                                {"pci_address", "0000:10:1b.0"}}));
  EXPECT_EQ(info(m, "ibfabric_sysfs_port_info", p),
            (std::map<std::string, std::string>{{"device", "rdmap16s27"},
                                                {"port", "1"},
                                                {"link_layer", "Unknown"},
                                                {"state", "ACTIVE"},
                                                {"physical_state", "LinkUp"},
                                                {"link_width", "4X"},
                                                {"link_speed", "EDR"}}));
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", p), 12.5e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_effective_rate_bytes_per_second", p), 12.5e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_lmc", p), 1);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_transmit_bytes_total", p), 918273645546);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_receive_bytes_total", p), 817263544536);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_transmit_packets_total", p), 120034567);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_receive_packets_total", p), 110023456);
  const std::map<std::string, double> efa = {
      {"ibfabric_sysfs_port_efa_receive_drops_total", 17},
      {"ibfabric_sysfs_port_efa_send_bytes_total", 4096000123},
      {"ibfabric_sysfs_port_efa_send_work_requests_total", 1000123},
      {"ibfabric_sysfs_port_efa_recv_bytes_total", 3072000456},
      {"ibfabric_sysfs_port_efa_recv_work_requests_total", 750456},
      {"ibfabric_sysfs_port_efa_rdma_read_work_requests_total", 20000789},
      {"ibfabric_sysfs_port_efa_rdma_read_bytes_total", 655360000789},
      {"ibfabric_sysfs_port_efa_rdma_read_work_request_errors_total", 2},
      {"ibfabric_sysfs_port_efa_rdma_read_response_bytes_total", 524288000321},
      {"ibfabric_sysfs_port_efa_rdma_write_work_requests_total", 3000654},
      {"ibfabric_sysfs_port_efa_rdma_write_bytes_total", 98304000654},
      {"ibfabric_sysfs_port_efa_rdma_write_work_request_errors_total", 0},
      {"ibfabric_sysfs_port_efa_rdma_write_received_bytes_total", 81920000987},
      {"ibfabric_sysfs_port_efa_retransmitted_bytes_total", 26214400},
      {"ibfabric_sysfs_port_efa_retransmitted_packets_total", 3200},
      {"ibfabric_sysfs_port_efa_retransmit_timeouts_total", 9},
      {"ibfabric_sysfs_port_efa_unresponsive_remote_events_total", 1},
      {"ibfabric_sysfs_port_efa_impaired_remote_connection_events_total", 4},
  };
  for (const auto& [metric, want] : efa) EXPECT_EQ(value(m, metric, p), want) << metric;
  // Every port counter of the driver has a name: no hw_stat, no PortCounters.
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_hw_stat_total").empty());
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_symbol_errors_total").empty());
  // The admin-queue statistics stay generic, device-wide.
  EXPECT_EQ(samples(m, "ibfabric_sysfs_device_hw_stat_total").size(), 12u);
  EXPECT_EQ(value(m, "ibfabric_sysfs_device_hw_stat_total",
                  {{"device", "rdmap16s27"}, {"counter", "keep_alive_rcvd"}}),
            86400);
  EXPECT_EQ(value(m, "ibfabric_sysfs_device_hw_stat_total",
                  {{"device", "rdmap16s27"}, {"counter", "create_qp_err"}}),
            1);
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", p), 0);
}

// Without a readable PCI vendor an EFA port is known by rdma_read_resp_bytes; a name taken by
// counters/ (port_xmit_data) leaves EFA's tx_bytes as hw_stat instead of a duplicate series.
TEST(SysfsCollector, EfaByCounterNamesAndNoDuplicateSeries) {
  TempDir tmp;
  const fs::path root = tmp.path();
  const fs::path dev = root / "devices/virtual/infiniband/efa_7";
  fs::create_directories(root / "class/infiniband");
  fs::create_directory_symlink("../../devices/virtual/infiniband/efa_7",
                               root / "class/infiniband/efa_7");
  write(dev / "node_type", "7: unspecified\n");
  write(dev / "node_guid", "0000:0000:0000:0001\n");
  write(dev / "sys_image_guid", "0000:0000:0000:0000\n");
  write(dev / "fw_ver", "\n");
  write(dev / "node_desc", "\n");
  const fs::path port = dev / "ports/1";
  write(port / "state", "4: ACTIVE\n");
  write(port / "phys_state", "5: LinkUp\n");
  write(port / "rate", "100 Gb/sec (4X EDR)\n");
  write(port / "lid", "0x0\n");
  write(port / "sm_lid", "0x0\n");
  write(port / "sm_sl", "0\n");
  write(port / "lid_mask_count", "1\n");
  write(port / "link_layer", "Unknown\n");
  write(port / "counters/port_xmit_data", "100\n");
  write(port / "hw_counters/tx_bytes", "999\n");
  write(port / "hw_counters/rx_bytes", "888\n");
  write(port / "hw_counters/rdma_read_resp_bytes", "777\n");
  auto collector = make(root.string());
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels p{{"device", "efa_7"}, {"port", "1"}};
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_transmit_bytes_total", p), 400);
  EXPECT_EQ(samples(m, "ibfabric_sysfs_port_transmit_bytes_total", p).size(), 1u);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_hw_stat_total",
                  {{"device", "efa_7"}, {"port", "1"}, {"counter", "tx_bytes"}}),
            999);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_receive_bytes_total", p), 888);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_efa_rdma_read_response_bytes_total", p), 777);
}

// Before Linux 4.5 (legacy mlx4) the 64-bit counters were in counters_ext/ and counters/ held
// 32-bit PortCounters, saturated at 2^32-1 here: the 64-bit value wins, the 32-bit one is not
// exported at all (tests/fixtures/sysfs/legacy-mlx4).
TEST(SysfsCollector, LegacyCountersExtWinOverSaturated32BitCounters) {
  auto collector = make(fixture("legacy-mlx4"));
  auto result = collect(*collector);
  ASSERT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels p{{"device", "mlx4_0"}, {"port", "1"}};
  expect_counters(m, p,
                  {{"port_xmit_data", 51539607552492},  // 12884901888123 words
                   {"port_rcv_data", 47244640257824},   // 11811160064456 words
                   {"port_xmit_packets", 25769803776789},
                   {"port_rcv_packets", 21474836480321},
                   {"unicast_xmit_packets", 25769800000000},
                   {"unicast_rcv_packets", 21474800000000},
                   {"multicast_xmit_packets", 3776789},
                   {"multicast_rcv_packets", 36480321},
                   {"symbol_error", 6},
                   {"port_xmit_discards", 13},
                   {"port_xmit_wait", 77000123}});
  for (const auto& [file, metric] : kNamed) {
    EXPECT_EQ(samples(m, metric, p).size(), 1u) << metric;
  }
  EXPECT_TRUE(samples(m, "ibfabric_sysfs_port_pma_stat_total").empty());
  // 4 lanes of FDR: 14.0625 Gb/s signalling, 64/66 of it data = 54.5454... Gb/s.
  auto effective = value(m, "ibfabric_sysfs_port_effective_rate_bytes_per_second", p);
  ASSERT_TRUE(effective);
  EXPECT_NEAR(*effective, 6818181818.18, 0.01);
  EXPECT_EQ(value(m, "ibfabric_sysfs_port_rate_bytes_per_second", p), 7e9);
  EXPECT_EQ(value(m, "ibfabric_sysfs_read_errors_total", p), 0);
}

TEST(SysfsCollector, EffectiveRateByLinkLayer) {
  auto two = collect(*make(fixture("two-port")));
  ASSERT_TRUE(two.success) << two.error;
  // Port 2 is Ethernet "40 Gb/sec (4X QDR)": 40GbE carries 40 Gb/s of data, not 4 * 8.
  EXPECT_EQ(value(two.metrics, "ibfabric_sysfs_port_effective_rate_bytes_per_second",
                  {{"device", "mlx4_0"}, {"port", "2"}}),
            5e9);
  auto down = collect(*make(fixture("down-polling")));
  ASSERT_TRUE(down.success) << down.error;
  // InfiniBand "10 Gb/sec (4X SDR)": 4 * 2.5 * 8/10 = 8 Gb/s.
  EXPECT_EQ(
      value(down.metrics, "ibfabric_sysfs_port_effective_rate_bytes_per_second", kMlx5_0Port1),
      1e9);
}

TEST(SysfsCollector, DevicesIncludeAndExcludeMatchWholeNames) {
  auto only_mlx = collect(*make(fixture("roce"), "devices_include: 'mlx5_[0-9]+'"));
  ASSERT_TRUE(only_mlx.success);
  EXPECT_EQ(samples(only_mlx.metrics, "ibfabric_sysfs_device_info").size(), 1u);
  EXPECT_EQ(samples(only_mlx.metrics, "ibfabric_sysfs_device_info", {{"device", "mlx5_1"}}).size(),
            1u);
  // A partial match is no match: "mlx5" does not select mlx5_1.
  auto partial = collect(*make(fixture("roce"), "devices_include: mlx5"));
  EXPECT_TRUE(samples(partial.metrics, "ibfabric_sysfs_device_info").empty());
  auto no_rxe = collect(*make(fixture("roce"), "devices_exclude: 'rxe.*'"));
  EXPECT_EQ(samples(no_rxe.metrics, "ibfabric_sysfs_device_info").size(), 1u);
  EXPECT_TRUE(samples(no_rxe.metrics, "ibfabric_sysfs_port_info", {{"device", "rxe0"}}).empty());
  // Exclude wins over include and over the devices list.
  auto both = collect(*make(fixture("roce"),
                            "{devices: [mlx5_1, rxe0], devices_include: '.*', "
                            "devices_exclude: 'mlx5_1'}"));
  EXPECT_EQ(samples(both.metrics, "ibfabric_sysfs_device_info").size(), 1u);
  EXPECT_EQ(samples(both.metrics, "ibfabric_sysfs_device_info", {{"device", "rxe0"}}).size(), 1u);
}

TEST(SysfsCollector, InvalidDeviceRegexIsAConfigErrorAtItsPosition) {
  TempDir tmp;
  try {
    make(tmp.path(), "enabled: true\ndevices_exclude: 'mlx5_[0-'\n");
    FAIL() << "an unterminated bracket is not a regular expression";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("collectors.sysfs.devices_exclude"), std::string::npos) << what;
    EXPECT_NE(what.find("test.yaml:2:"), std::string::npos) << what;
    EXPECT_NE(what.find("invalid regular expression \"mlx5_[0-\""), std::string::npos) << what;
  }
  EXPECT_THROW(make(tmp.path(), "devices_include: [a, b]"), ConfigError);
}

}  // namespace
}  // namespace ibfabric::sysfs
