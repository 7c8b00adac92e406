#include "collectors/probe/mad_ping.h"
#include "collectors/probe/probe_collector.h"
#include "config/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/io_context.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace ibfabric::probe {
namespace {

using namespace std::chrono_literals;

TEST(MadPing, AnswerCarriesTheHostNameThenTheHoldTime) {
  auto data = encode_ping_answer("gpu-node-07.cluster", 12345ns);
  ASSERT_EQ(data.size(), 216u);
  // What stock ibping prints: the NUL-terminated string at the start.
  EXPECT_STREQ(reinterpret_cast<const char*>(data.data()), "gpu-node-07.cluster");
  EXPECT_EQ(decode_ping_hold(data.data(), data.size()), 12345ns);
  // The marker ends inside the first 224 octets of the MAD (40 of header + 176 of data).
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(data.data()) + 160, 4), "IBFH");
  EXPECT_EQ(data[168 + 7], 12345 & 0xff);
  EXPECT_EQ(data[168 + 6], (12345 >> 8) & 0xff);
}

TEST(MadPing, ALongHostNameIsCutBeforeTheMarker) {
  auto data = encode_ping_answer(std::string(300, 'h'), 7ns);
  EXPECT_EQ(std::strlen(reinterpret_cast<const char*>(data.data())), 159u);
  EXPECT_EQ(decode_ping_hold(data.data(), data.size()), 7ns);
}

TEST(MadPing, AnAnswerFromStockIbpingHasNoHoldTime) {
  // ibping -S fills the data area with "hostname.domainname" and zeros.
  std::vector<std::uint8_t> data(216, 0);
  std::memcpy(data.data(), "vm.(none)", 9);
  EXPECT_FALSE(decode_ping_hold(data.data(), data.size()));
  // Nor does anything short, a wrong version, or a hold time no responder could mean.
  auto ours = encode_ping_answer("x", 1ns);
  EXPECT_FALSE(decode_ping_hold(ours.data(), 200));
  EXPECT_FALSE(decode_ping_hold(nullptr, 216));
  auto bad_version = ours;
  bad_version[164] = 2;
  EXPECT_FALSE(decode_ping_hold(bad_version.data(), bad_version.size()));
  auto huge = ours;
  huge[168] = 0xff;
  EXPECT_FALSE(decode_ping_hold(huge.data(), huge.size()));
}

// NodeRecord as IBA 15.2.5.2 lays it out, byte by byte: LID (2), reserved (2), NodeInfo (40:
// BaseVersion, ClassVersion, NodeType, NumPorts, SystemImageGUID, NodeGUID, PortGUID,
// PartitionCap, DeviceID, Revision, LocalPortNum, VendorID), NodeDescription (64).
std::vector<std::uint8_t> node_record(std::uint16_t lid, std::uint8_t type, std::uint64_t node,
                                      std::uint64_t port_guid, std::uint8_t port,
                                      const std::string& desc) {
  std::vector<std::uint8_t> r(108, 0);
  r[0] = static_cast<std::uint8_t>(lid >> 8);
  r[1] = static_cast<std::uint8_t>(lid);
  r[4 + 2] = type;
  for (int i = 0; i < 8; ++i) {
    r[4 + 12 + i] = static_cast<std::uint8_t>(node >> (56 - 8 * i));
    r[4 + 20 + i] = static_cast<std::uint8_t>(port_guid >> (56 - 8 * i));
  }
  r[4 + 36] = port;
  std::memcpy(r.data() + 44, desc.data(), std::min<std::size_t>(desc.size(), 64));
  return r;
}

// A GetTableResp as the engine hands it over: records from octet 56, AttributeOffset (octets
// 44-45, in 8-octet words) their stride.
std::vector<std::uint8_t> table(const std::vector<std::vector<std::uint8_t>>& records,
                                std::uint16_t words = 14) {
  std::vector<std::uint8_t> mad(std::max<std::size_t>(256, 56 + records.size() * words * 8u), 0);
  mad[1] = IB_SA_CLASS;
  mad[44] = static_cast<std::uint8_t>(words >> 8);
  mad[45] = static_cast<std::uint8_t>(words);
  for (std::size_t i = 0; i < records.size(); ++i) {
    std::copy(records[i].begin(), records[i].end(),
              mad.begin() + static_cast<std::ptrdiff_t>(56 + i * words * 8u));
  }
  return mad;
}

TEST(NodeRecords, DecodesEveryRecordAtItsStride) {
  auto mad = table({node_record(5, 1, 0x0002c90300a1b2c0, 0x0002c90300a1b2c1, 1, "gpu-07 mlx5_0"),
                    node_record(0, 1, 0x10, 0x11, 1, "no lid yet"),
                    node_record(2, 2, 0x200000, 0x200000, 0, "Switch1")});
  auto records = decode_node_records(mad.data(), mad.size());
  ASSERT_EQ(records.size(), 2u);  // the one without a LID is left out
  EXPECT_EQ(records[0].lid, 5);
  EXPECT_EQ(records[0].node_type, 1);
  EXPECT_EQ(records[0].node_guid, 0x0002c90300a1b2c0u);
  EXPECT_EQ(records[0].port_guid, 0x0002c90300a1b2c1u);
  EXPECT_EQ(records[0].port, 1);
  EXPECT_EQ(records[0].description, "gpu-07 mlx5_0");
  EXPECT_EQ(records[1].lid, 2);
  EXPECT_EQ(records[1].node_type, 2);
  EXPECT_EQ(records[1].description, "Switch1");
}

TEST(NodeRecords, ShortOrGarbledTablesGiveFewerRecordsNeverAnOverread) {
  auto mad = table({node_record(5, 1, 1, 2, 1, "a"), node_record(6, 1, 3, 4, 1, "b")});
  // Cut inside the second record.
  EXPECT_EQ(decode_node_records(mad.data(), 56 + 112 + 50).size(), 1u);
  // A stride smaller than a record, or 0 (an empty table).
  auto small = table({node_record(5, 1, 1, 2, 1, "a")}, 4);
  EXPECT_TRUE(decode_node_records(small.data(), small.size()).empty());
  auto empty = table({}, 0);
  EXPECT_TRUE(decode_node_records(empty.data(), empty.size()).empty());
  EXPECT_TRUE(decode_node_records(nullptr, 300).empty());
  EXPECT_TRUE(decode_node_records(mad.data(), 56).empty());
  // A description that fills all 64 octets, without a terminating NUL.
  auto full = table({node_record(9, 1, 1, 2, 1, std::string(64, 'd'))});
  auto records = decode_node_records(full.data(), full.size());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].description, std::string(64, 'd'));
}

TEST(NodeRecords, QueriesSetTheComponentMaskAndTheValue) {
  auto by_guid = node_record_query(0x0002c90300a1b2c1, "");
  EXPECT_EQ(by_guid.method, IB_MAD_METHOD_GET_TABLE);
  EXPECT_EQ(by_guid.attr_id, IB_SA_ATTR_NODERECORD);
  EXPECT_EQ(by_guid.sa_component_mask, 1u << 8);
  ASSERT_GE(by_guid.payload.size(), 32u);
  EXPECT_EQ(by_guid.payload[24], 0x00);  // PortGUID at record octet 24, big-endian
  EXPECT_EQ(by_guid.payload[25], 0x02);
  EXPECT_EQ(by_guid.payload[31], 0xc1);

  auto by_name = node_record_query(0, "gpu-07 mlx5_0");
  EXPECT_EQ(by_name.sa_component_mask, 1u << 14);
  ASSERT_GE(by_name.payload.size(), 44u + 64u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(by_name.payload.data()) + 44),
            "gpu-07 mlx5_0");

  auto all = node_record_query(0, "");
  EXPECT_EQ(all.sa_component_mask, 0u);
  EXPECT_TRUE(all.payload.empty());
}

std::unique_ptr<Collector> make(const std::string& yaml) {
  // Outlives the collectors made here: the probe collector owns timers of it.
  static boost::asio::io_context io;
  CollectorContext context{io, "/", {}};
  ConfigSection section(YAML::Load(yaml), "test.yaml", "collectors.probe");
  return spec().create(context, section);
}

std::string error_of(const std::string& yaml) {
  try {
    make(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ProbeTargets, EachTargetIsOneKindAndBadOnesNameTheKey) {
  EXPECT_NO_THROW(
      make("targets: [{address: \"10.0.0.2:10917\", name: a}, {lid: 5}, "
           "{guid: \"0x0002c90300a1b2c1\"}, {name: \"gpu-07 mlx5_0\"}]"));
  // A UDP target may name its InfiniBand port (for the paths collector), by LID or GUID.
  EXPECT_NO_THROW(
      make("targets: [{lid: 5, address: \"10.0.0.2:1\"}, "
           "{guid: \"0x0002c90300a1b2c1\", address: \"10.0.0.3:1\"}]"));
  auto both = error_of("targets: [{lid: 5, guid: \"0x0002c90300a1b2c1\"}]");
  EXPECT_NE(both.find("not both"), std::string::npos) << both;
  auto none = error_of("targets: [{}]");
  EXPECT_NE(none.find("lid, guid or name"), std::string::npos) << none;
  auto guid = error_of("targets: [{guid: \"0xzz\"}]");
  EXPECT_NE(guid.find("collectors.probe.targets"), std::string::npos) << guid;
  EXPECT_NE(guid.find("port GUID"), std::string::npos) << guid;
  auto lid = error_of("targets: [{lid: 70000}]");
  EXPECT_NE(lid.find("lid"), std::string::npos) << lid;
  auto key = error_of("discover: maybe");
  EXPECT_NE(key.find("discover"), std::string::npos) << key;
}

}  // namespace
}  // namespace ibfabric::probe
