// The sriov collector on the fixture trees tests/fixtures/sysfs/sriov-ib (ConnectX-6
// InfiniBand PF with 8 of 16 VFs enabled) and sriov-roce (two ConnectX-6 Dx Ethernet PFs, one
// in switchdev mode with 2 VFs). Expected values come from the fixture files; netlink values
// come from RTM_NEWLINK bytes built with libnl and parsed by the collector's own parser.

#include "collectors/sriov/sriov_collector.h"
#include "collectors/sriov/sriov_netlink.h"
#include "collectors/sriov/sriov_sysfs.h"

#include "tests/unit/collector_test_support.h"

#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <boost/asio/io_context.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace ibfabric::sriov {
namespace {

using namespace ibfabric::test_support;

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(IBFABRIC_SOURCE_DIR) + "/tests/fixtures/sysfs/" + name;
}

std::string copy_fixture(const TempDir& tmp, const std::string& name) {
  fs::copy(fixture(name), tmp.path(),
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  return tmp.path();
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// --- metrics helpers ---------------------------------------------------------------------------

// --- collector helpers ---------------------------------------------------------------------

std::unique_ptr<Collector> make(const std::string& root, const std::string& yaml) {
  boost::asio::io_context io;
  CollectorContext context{io, root, {}};
  ConfigSection section(YAML::Load(yaml), "test.yaml", "collectors.sriov");
  return spec().create(context, section);
}

// An RTM_NEWLINK for `ifname` with VFs `indexes`, each with counters index*100+1..+8, and a
// DONE, as one datagram; built with libnl.
std::vector<std::uint8_t> dump_bytes(const std::string& ifname,
                                     const std::vector<std::uint32_t>& indexes) {
  std::vector<std::uint8_t> bytes;
  auto add = [&](nl_msg* m) {
    const nlmsghdr* h = nlmsg_hdr(m);
    const auto* p = reinterpret_cast<const std::uint8_t*>(h);
    bytes.insert(bytes.end(), p, p + NLMSG_ALIGN(h->nlmsg_len));
    nlmsg_free(m);
  };
  nl_msg* m = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_MULTI);
  nlmsg_hdr(m)->nlmsg_seq = 1;
  ifinfomsg header{};
  header.ifi_index = 5;
  nlmsg_append(m, &header, sizeof header, NLMSG_ALIGNTO);
  nla_put_string(m, IFLA_IFNAME, ifname.c_str());
  nla_put_u32(m, IFLA_NUM_VF, static_cast<std::uint32_t>(indexes.size()));
  nlattr* list = nla_nest_start(m, IFLA_VFINFO_LIST);
  for (auto index : indexes) {
    nlattr* vf = nla_nest_start(m, IFLA_VF_INFO);
    ifla_vf_mac mac{};
    mac.vf = index;
    mac.mac[0] = 0x02;
    mac.mac[5] = static_cast<std::uint8_t>(index);
    nla_put(m, IFLA_VF_MAC, sizeof mac, &mac);
    ifla_vf_link_state state{index, IFLA_VF_LINK_STATE_AUTO};
    nla_put(m, IFLA_VF_LINK_STATE, sizeof state, &state);
    ifla_vf_trust trust{index, index % 2};
    nla_put(m, IFLA_VF_TRUST, sizeof trust, &trust);
    ifla_vf_spoofchk spoof{index, 1};
    nla_put(m, IFLA_VF_SPOOFCHK, sizeof spoof, &spoof);
    nlattr* stats = nla_nest_start(m, IFLA_VF_STATS);
    for (int type = IFLA_VF_STATS_RX_PACKETS; type <= IFLA_VF_STATS_TX_DROPPED; ++type) {
      if (type == IFLA_VF_STATS_PAD) continue;
      nla_put_u64(m, type, index * 100ull + static_cast<unsigned>(type) + 1);
    }
    nla_nest_end(m, stats);
    nla_nest_end(m, vf);
  }
  nla_nest_end(m, list);
  add(m);
  m = nlmsg_alloc_simple(NLMSG_DONE, NLM_F_MULTI);
  nlmsg_hdr(m)->nlmsg_seq = 1;
  int zero = 0;
  nlmsg_append(m, &zero, sizeof zero, NLMSG_ALIGNTO);
  add(m);
  return bytes;
}

SriovCollector::NetlinkDump replay(std::vector<std::uint8_t> bytes) {
  return [bytes] {
    std::vector<PfLink> links;
    if (!parse_dump_datagram(bytes, 1, links)) throw NetlinkError("dump did not end");
    return links;
  };
}

const char* const kVfAddresses[] = {"0000:af:00.1", "0000:af:00.2", "0000:af:00.3", "0000:af:00.4",
                                    "0000:af:00.5", "0000:af:00.6", "0000:af:00.7", "0000:af:01.0"};

// --- parsers -------------------------------------------------------------------------------

TEST(SriovSysfsParse, Guids) {
  EXPECT_EQ(parse_vf_guid("0c:42:a1:03:00:af:10:07\n"), "0x0c42a10300af1007");
  EXPECT_EQ(parse_vf_guid("0C:42:A1:03:00:AF:10:07"), "0x0c42a10300af1007");
  EXPECT_FALSE(parse_vf_guid("0c42:a103:00af:1007"));  // the ib_core spelling is not mlx5's
  EXPECT_FALSE(parse_vf_guid("0c:42:a1:03:00:af:10"));
  EXPECT_FALSE(parse_vf_guid("0c:42:a1:03:00:af:10:0g"));
  EXPECT_FALSE(parse_vf_guid("0c-42-a1-03-00-af-10-07"));
  EXPECT_FALSE(parse_vf_guid(""));
}

TEST(SriovSysfsParse, Policies) {
  EXPECT_EQ(parse_link_policy("Follow\n"), LinkPolicy::follow);
  EXPECT_EQ(parse_link_policy("Up\n"), LinkPolicy::up);
  EXPECT_EQ(parse_link_policy("Down"), LinkPolicy::down);
  EXPECT_FALSE(parse_link_policy("Invalid policy\n"));
  EXPECT_FALSE(parse_link_policy("follow"));
}

// --- inventory -----------------------------------------------------------------------------

TEST(SriovInventory, InfiniBandPfWithEightVfs) {
  const SriovInventory inventory = read_inventory(fixture("sriov-ib"));
  EXPECT_TRUE(inventory.problems.empty());
  ASSERT_EQ(inventory.pfs.size(), 1u);
  const PfInventory& pf = inventory.pfs[0];
  EXPECT_EQ(pf.name(), "ibp175s0");
  EXPECT_EQ(pf.pci_address, "0000:af:00.0");
  EXPECT_EQ(pf.rdma_devices, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(pf.total_vfs, 16u);
  EXPECT_EQ(pf.enabled_vfs, 8u);
  ASSERT_EQ(pf.vfs.size(), 8u);
  for (std::uint32_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    const VfInventory& vf = pf.vfs[i];
    EXPECT_EQ(vf.index, i);
    EXPECT_EQ(vf.pci_address, kVfAddresses[i]);
    char node[32], port[32];
    std::snprintf(node, sizeof node, "0x0c42a10300af10%02x", i);
    std::snprintf(port, sizeof port, "0x0c42a10300af20%02x", i);
    EXPECT_EQ(vf.node_guid, node);
    EXPECT_EQ(vf.port_guid, port);
    if (i <= 5) {
      EXPECT_EQ(vf.net_interfaces, std::vector<std::string>{"ibp175s0f" + std::to_string(i + 1)});
      EXPECT_EQ(vf.policy, LinkPolicy::follow);
    } else {
      EXPECT_TRUE(vf.net_interfaces.empty());  // in a pod's namespace, or bound to vfio-pci
    }
    if (i <= 6) {
      EXPECT_EQ(vf.rdma_devices, std::vector<std::string>{"mlx5_" + std::to_string(i + 1)});
    } else {
      EXPECT_TRUE(vf.rdma_devices.empty());
    }
  }
  EXPECT_EQ(pf.vfs[6].policy, LinkPolicy::up);
  EXPECT_EQ(pf.vfs[7].policy, LinkPolicy::down);
}

TEST(SriovInventory, RocePfsInSwitchdevModeNameTheUplinkNotARepresentor) {
  const SriovInventory inventory = read_inventory(fixture("sriov-roce"));
  EXPECT_TRUE(inventory.problems.empty());
  ASSERT_EQ(inventory.pfs.size(), 2u);
  const PfInventory& pf0 = inventory.pfs[0];
  EXPECT_EQ(pf0.name(), "ens1f0np0");  // not eth0 or ens1f0npf0vf1, VF representors
  EXPECT_EQ(pf0.pci_address, "0000:3b:00.0");
  EXPECT_EQ(pf0.rdma_devices, std::vector<std::string>{"mlx5_2"});
  EXPECT_EQ(pf0.total_vfs, 8u);
  EXPECT_EQ(pf0.enabled_vfs, 2u);
  ASSERT_EQ(pf0.vfs.size(), 2u);
  EXPECT_EQ(pf0.vfs[0].pci_address, "0000:3b:00.2");
  EXPECT_EQ(pf0.vfs[0].net_interfaces, std::vector<std::string>{"ens1f0v0"});
  EXPECT_EQ(pf0.vfs[0].rdma_devices, std::vector<std::string>{"mlx5_4"});
  EXPECT_FALSE(pf0.vfs[0].node_guid);  // no mlx5 sriov/ directory: no GUIDs, no error
  EXPECT_FALSE(pf0.vfs[0].policy);
  EXPECT_EQ(pf0.vfs[1].pci_address, "0000:3b:00.3");
  EXPECT_TRUE(pf0.vfs[1].net_interfaces.empty());
  EXPECT_EQ(pf0.vfs[1].rdma_devices, std::vector<std::string>{"mlx5_5"});

  const PfInventory& pf1 = inventory.pfs[1];
  EXPECT_EQ(pf1.name(), "ens1f1np1");
  EXPECT_EQ(pf1.enabled_vfs, 0u);
  EXPECT_TRUE(pf1.vfs.empty());
}

TEST(SriovInventory, TreesWithoutSriovHaveNoPfs) {
  for (const char* name : {"cx7-ndr", "roce", "two-port", "broken"}) {
    SCOPED_TRACE(name);
    const SriovInventory inventory = read_inventory(fixture(name));
    EXPECT_TRUE(inventory.pfs.empty());
    EXPECT_TRUE(inventory.problems.empty());
  }
  EXPECT_TRUE(read_inventory("/nonexistent-sysfs-root").pfs.empty());
}

// --- collector -----------------------------------------------------------------------------

TEST(SriovCollector, SysfsMetricsOfTheInfiniBandPf) {
  auto collector = make(fixture("sriov-ib"), "netlink: false");
  const CollectResult result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;

  auto pf = info(m, "ibfabric_sriov_pf_info", {{"pf", "ibp175s0"}});
  EXPECT_EQ(pf["pci_address"], "0000:af:00.0");
  EXPECT_EQ(pf["rdma_device"], "mlx5_0");
  EXPECT_EQ(value(m, "ibfabric_sriov_pf_vfs_supported", {{"pf", "ibp175s0"}}), 16);
  EXPECT_EQ(value(m, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}), 8);
  EXPECT_EQ(samples(m, "ibfabric_sriov_vf_info").size(), 8u);

  auto vf3 = info(m, "ibfabric_sriov_vf_info", {{"pf", "ibp175s0"}, {"vf", "3"}});
  EXPECT_EQ(vf3["pci_address"], "0000:af:00.4");
  EXPECT_EQ(vf3["net_interface"], "ibp175s0f4");
  EXPECT_EQ(vf3["rdma_device"], "mlx5_4");
  EXPECT_EQ(vf3["node_guid"], "0x0c42a10300af1003");
  EXPECT_EQ(vf3["port_guid"], "0x0c42a10300af2003");
  EXPECT_EQ(vf3["link_policy"], "Follow");
  auto vf7 = info(m, "ibfabric_sriov_vf_info", {{"vf", "7"}});
  EXPECT_EQ(vf7["pci_address"], "0000:af:01.0");
  EXPECT_EQ(vf7["net_interface"], "");
  EXPECT_EQ(vf7["rdma_device"], "");

  EXPECT_EQ(value(m, "ibfabric_sriov_vf_link_policy",
                  {{"pf", "ibp175s0"}, {"vf", "0"}, {"pci_address", "0000:af:00.1"}}),
            2);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_link_policy", {{"vf", "6"}}), 1);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_link_policy", {{"vf", "7"}}), 0);
  EXPECT_EQ(value(m, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 0);
  // netlink is off: no netlink families at all.
  EXPECT_EQ(family(m, "ibfabric_sriov_vf_receive_bytes_total"), nullptr);
}

TEST(SriovCollector, NetlinkCountersJoinTheSysfsPciAddress) {
  SriovCollector collector({fixture("sriov-ib"), {}}, replay(dump_bytes("ibp175s0", {0, 7})));
  const CollectResult result = collect(collector);
  EXPECT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  const Labels vf7{{"pf", "ibp175s0"}, {"vf", "7"}, {"pci_address", "0000:af:01.0"}};
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_receive_packets_total", vf7), 701);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_transmit_packets_total", vf7), 702);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_receive_bytes_total", vf7), 703);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_transmit_bytes_total", vf7), 704);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_receive_broadcast_packets_total", vf7), 705);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_receive_multicast_packets_total", vf7), 706);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_receive_dropped_packets_total", vf7), 708);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_transmit_dropped_packets_total", vf7), 709);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_link_state", vf7), 0);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_trusted", vf7), 1);
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_spoof_check", vf7), 1);
  auto netlink = info(m, "ibfabric_sriov_vf_netlink_info", vf7);
  EXPECT_EQ(netlink["mac"], "02:00:00:00:00:07");
  EXPECT_EQ(netlink["link_state"], "auto");
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_trusted", {{"vf", "0"}, {"pci_address", "0000:af:00.1"}}),
            0);
  EXPECT_EQ(samples(m, "ibfabric_sriov_vf_receive_bytes_total").size(), 2u);
  EXPECT_EQ(value(m, "ibfabric_sriov_netlink_errors_total", {}), 0);
}

TEST(SriovCollector, ANetlinkFailureKeepsTheSysfsMetrics) {
  std::vector<std::uint8_t> bytes = dump_bytes("ibp175s0", {0});
  bytes.resize(bytes.size() / 2);  // a datagram cut in the middle of the VF
  SriovCollector collector({fixture("sriov-ib"), {}}, replay(bytes));
  auto result = collect(collector);
  EXPECT_FALSE(result.success);
  EXPECT_NE(result.error.find("sriov: netlink:"), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("does not fit"), std::string::npos) << result.error;
  EXPECT_EQ(samples(result.metrics, "ibfabric_sriov_vf_info").size(), 8u);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}), 8);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_vf_receive_bytes_total").empty());
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_netlink_errors_total", {}), 1);
  result = collect(collector);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_netlink_errors_total", {}), 2);
}

TEST(SriovCollector, GarbledFilesCostTheirValueAreLoggedOnceAndCounted) {
  TempDir tmp;
  const fs::path root = copy_fixture(tmp, "sriov-ib");
  const fs::path pf = root / "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0";
  write(pf / "sriov_numvfs", "eight\n");
  write(pf / "sriov/3/node", "0c:42:a1:03:00:af:10\n");
  write(pf / "sriov/5/policy", "Invalid policy\n");
  fs::remove(pf / "sriov/6/port");  // missing: the driver has no such file, not an error

  LogCapture log;
  auto collector = make(root, "netlink: false");
  auto result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  EXPECT_EQ(value(m, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 3);
  EXPECT_FALSE(value(m, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}));
  EXPECT_EQ(value(m, "ibfabric_sriov_pf_vfs_supported", {{"pf", "ibp175s0"}}), 16);
  EXPECT_EQ(info(m, "ibfabric_sriov_vf_info", {{"vf", "3"}})["node_guid"], "");
  EXPECT_EQ(info(m, "ibfabric_sriov_vf_info", {{"vf", "3"}})["port_guid"], "0x0c42a10300af2003");
  EXPECT_EQ(info(m, "ibfabric_sriov_vf_info", {{"vf", "5"}})["link_policy"], "");
  EXPECT_FALSE(value(m, "ibfabric_sriov_vf_link_policy", {{"vf", "5"}}));
  EXPECT_EQ(info(m, "ibfabric_sriov_vf_info", {{"vf", "6"}})["port_guid"], "");
  EXPECT_EQ(samples(m, "ibfabric_sriov_vf_info").size(), 8u);

  auto lines = log.take();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "warning sriov: cannot use file=" + (pf / "sriov_numvfs").string() +
                          " error=\"cannot parse: expected a decimal number, got 'eight\\n'\"");

  result = collect(*collector);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 6);
  EXPECT_TRUE(log.take().empty());

  write(pf / "sriov_numvfs", "8\n");
  result = collect(*collector);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}), 8);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 8);
  lines = log.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "info sriov: file is good again file=" + (pf / "sriov_numvfs").string());
}

// A pod is deleted and its VFs are re-provisioned: numVfs goes 8 -> 6 -> 8. Every series of
// the removed VFs must vanish from the same collector's next collection, and come back when
// the VFs do.
TEST(SriovCollector, VfsThatGoAwayLeaveNoSeries) {
  TempDir tmp;
  const fs::path root = copy_fixture(tmp, "sriov-ib");
  const fs::path pf = root / "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0";
  auto kernel =
      std::make_shared<std::vector<std::uint8_t>>(dump_bytes("ibp175s0", {0, 1, 2, 3, 4, 5, 6, 7}));
  SriovCollector collector({root.string(), {}}, [kernel] {
    std::vector<PfLink> links;
    parse_dump_datagram(*kernel, 1, links);
    return links;
  });
  auto vf_series = [](const MetricFamilies& m, const std::string& vf) {
    std::size_t n = 0;
    for (const auto& f : m) {
      for (const auto& metric : f.samples) {
        if (has_labels(metric, {{"vf", vf}})) ++n;
      }
    }
    return n;
  };

  auto before = collect(collector);
  EXPECT_EQ(samples(before.metrics, "ibfabric_sriov_vf_info").size(), 8u);
  EXPECT_EQ(samples(before.metrics, "ibfabric_sriov_vf_receive_bytes_total").size(), 8u);
  const std::size_t per_vf = vf_series(before.metrics, "7");
  EXPECT_EQ(per_vf, 15u);  // vf_info, link_policy, numa_node, netlink_info, 3 settings, 8 counters

  const fs::path saved = fs::path(tmp.path()) / "saved-sriov";
  fs::create_directories(saved);
  for (const char* vf : {"6", "7"}) {
    fs::remove(pf / ("virtfn" + std::string(vf)));
    fs::rename(pf / "sriov" / vf, saved / vf);
  }
  write(pf / "sriov_numvfs", "6\n");
  *kernel = dump_bytes("ibp175s0", {0, 1, 2, 3, 4, 5});
  auto during = collect(collector);
  EXPECT_TRUE(during.success) << during.error;
  EXPECT_EQ(vf_series(during.metrics, "6"), 0u);
  EXPECT_EQ(vf_series(during.metrics, "7"), 0u);
  EXPECT_EQ(vf_series(during.metrics, "5"), per_vf);
  EXPECT_EQ(value(during.metrics, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}), 6);
  EXPECT_EQ(value(during.metrics, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 0);

  for (const char* vf : {"6", "7"}) {
    fs::rename(saved / vf, pf / "sriov" / vf);
  }
  fs::create_directory_symlink("../0000:af:00.7", pf / "virtfn6");
  fs::create_directory_symlink("../0000:af:01.0", pf / "virtfn7");
  write(pf / "sriov_numvfs", "8\n");
  *kernel = dump_bytes("ibp175s0", {0, 1, 2, 3, 4, 5, 6, 7});
  auto after = collect(collector);
  EXPECT_EQ(vf_series(after.metrics, "7"), per_vf);
  EXPECT_EQ(info(after.metrics, "ibfabric_sriov_vf_info", {{"vf", "7"}})["pci_address"],
            "0000:af:01.0");
}

// The whole PF going away (driver unbound) takes its read-error counter along.
TEST(SriovCollector, APfThatGoesAwayLeavesNoSeries) {
  TempDir tmp;
  const fs::path root = copy_fixture(tmp, "sriov-ib");
  const fs::path pf = root / "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0";
  write(pf / "sriov_numvfs", "garbled\n");
  auto collector = make(root, "netlink: false");
  auto before = collect(*collector);
  EXPECT_EQ(value(before.metrics, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 1);
  fs::remove(root / "class/net/ibp175s0");
  fs::remove(root / "class/infiniband/mlx5_0");
  auto after = collect(*collector);
  EXPECT_TRUE(after.success);
  for (const auto& f : after.metrics) EXPECT_TRUE(f.samples.empty()) << f.name;
}

TEST(SriovCollector, ConfigKeys) {
  EXPECT_THROW(make(fixture("sriov-ib"), "netlink_timeout: 11s"), ConfigError);
  EXPECT_THROW(make(fixture("sriov-ib"), "netlink: maybe"), ConfigError);
  EXPECT_THROW(make(fixture("sriov-ib"), "interfaces: [ib0]"), ConfigError);
  EXPECT_NO_THROW(make(fixture("sriov-ib"), "{netlink: true, netlink_timeout: 250ms}"));
}

// The live kernel of this machine. The dump must succeed; links with VFs are expected only if
// this machine's sysfs shows a net device whose PCI function has VFs enabled (none on the
// development machine, where the dump comes back empty).
TEST(SriovNetlinkLive, TheLocalKernelAnswersTheDump) {
  bool vfs_in_sysfs = false;
  std::error_code ignored;
  for (fs::directory_iterator it("/sys/class/net", ignored), end; !ignored && it != end;
       it.increment(ignored)) {
    std::ifstream numvfs(it->path() / "device/sriov_numvfs");
    unsigned count = 0;
    if (numvfs >> count && count > 0) vfs_in_sysfs = true;
  }
  const auto links = dump_links_with_vfs(std::chrono::milliseconds(2000));
  for (const auto& link : links) {
    EXPECT_FALSE(link.ifname.empty());
    EXPECT_TRUE(link.num_vf.value_or(0) > 0 || !link.vfs.empty()) << link.ifname;
  }
  if (!vfs_in_sysfs) {
    EXPECT_TRUE(links.empty());
  }
}

}  // namespace
}  // namespace ibfabric::sriov
