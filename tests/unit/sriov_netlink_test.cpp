// rtnetlink parsing of the sriov collector on real message bytes: every message here is built
// with libnl's message construction (nlmsg_alloc, nla_put, nla_nest_start), laid out as the
// kernel's rtnl_fill_vfinfo() lays out a VF, then parsed by our code. Malformed and truncated
// variants must fail with a NetlinkError that says what was wrong, never crash.

#include "collectors/sriov/sriov_netlink.h"

#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

namespace ibfabric::sriov {
namespace {

using Bytes = std::vector<std::uint8_t>;
using Message = std::unique_ptr<nl_msg, decltype(&nlmsg_free)>;

constexpr std::uint32_t kSeq = 4242;

// Room for a PF with hundreds of VFs (nlmsg_alloc_simple allocates one page).
Message new_message(int type, int flags = NLM_F_MULTI) {
  Message message(nlmsg_alloc_size(1 << 18), &nlmsg_free);
  if (!message || !nlmsg_put(message.get(), NL_AUTO_PORT, kSeq, type, 0, flags)) {
    throw std::runtime_error("cannot allocate a netlink message");
  }
  return message;
}

Bytes bytes_of(nl_msg* message) {
  const nlmsghdr* header = nlmsg_hdr(message);
  const auto* begin = reinterpret_cast<const std::uint8_t*>(header);
  return Bytes(begin, begin + NLMSG_ALIGN(header->nlmsg_len));
}

void append(Bytes& into, const Bytes& more) { into.insert(into.end(), more.begin(), more.end()); }

struct VfSpec {
  std::uint32_t index;
  std::uint8_t last_mac_byte;
  std::uint32_t link_state;
  std::uint32_t spoofchk;
  std::uint32_t trust;
  std::uint64_t base;  // counters are base+1 .. base+8
  bool with_guids = true;
  bool with_dropped = true;
};

void put_vf(nl_msg* m, const VfSpec& spec) {
  nlattr* info = nla_nest_start(m, IFLA_VF_INFO);
  ifla_vf_mac mac{};
  mac.vf = spec.index;
  const std::uint8_t address[6] = {0x02, 0x00, 0x5e, 0x10, 0x00, spec.last_mac_byte};
  std::memcpy(mac.mac, address, sizeof address);
  nla_put(m, IFLA_VF_MAC, sizeof mac, &mac);
  ifla_vf_vlan vlan{spec.index, 0, 0};
  nla_put(m, IFLA_VF_VLAN, sizeof vlan, &vlan);
  ifla_vf_tx_rate rate{spec.index, 0};
  nla_put(m, IFLA_VF_TX_RATE, sizeof rate, &rate);
  ifla_vf_spoofchk spoof{spec.index, spec.spoofchk};
  nla_put(m, IFLA_VF_SPOOFCHK, sizeof spoof, &spoof);
  ifla_vf_link_state state{spec.index, spec.link_state};
  nla_put(m, IFLA_VF_LINK_STATE, sizeof state, &state);
  ifla_vf_trust trust{spec.index, spec.trust};
  nla_put(m, IFLA_VF_TRUST, sizeof trust, &trust);
  if (spec.with_guids) {
    ifla_vf_guid node{spec.index, 0x0c42a10300af1000ull + spec.index};
    ifla_vf_guid port{spec.index, 0x0c42a10300af2000ull + spec.index};
    nla_put(m, IFLA_VF_IB_NODE_GUID, sizeof node, &node);
    nla_put(m, IFLA_VF_IB_PORT_GUID, sizeof port, &port);
  }
  nlattr* stats = nla_nest_start(m, IFLA_VF_STATS);
  // The kernel pads 64-bit values with IFLA_VF_STATS_PAD (nla_put_u64_64bit).
  nla_put(m, IFLA_VF_STATS_PAD, 0, nullptr);
  nla_put_u64(m, IFLA_VF_STATS_RX_PACKETS, spec.base + 1);
  nla_put_u64(m, IFLA_VF_STATS_TX_PACKETS, spec.base + 2);
  nla_put_u64(m, IFLA_VF_STATS_RX_BYTES, spec.base + 3);
  nla_put_u64(m, IFLA_VF_STATS_TX_BYTES, spec.base + 4);
  nla_put_u64(m, IFLA_VF_STATS_BROADCAST, spec.base + 5);
  nla_put_u64(m, IFLA_VF_STATS_MULTICAST, spec.base + 6);
  if (spec.with_dropped) {
    nla_put_u64(m, IFLA_VF_STATS_RX_DROPPED, spec.base + 7);
    nla_put_u64(m, IFLA_VF_STATS_TX_DROPPED, spec.base + 8);
  }
  nla_nest_end(m, stats);
  nla_nest_end(m, info);
}

// An RTM_NEWLINK as a link dump carries it: ifinfomsg, IFLA_IFNAME, some unrelated
// attributes, IFLA_NUM_VF and IFLA_VFINFO_LIST.
Bytes newlink(int ifindex, const char* name, const std::vector<VfSpec>& vfs) {
  Message m = new_message(RTM_NEWLINK);
  ifinfomsg header{};
  header.ifi_family = AF_UNSPEC;
  header.ifi_index = ifindex;
  nlmsg_append(m.get(), &header, sizeof header, NLMSG_ALIGNTO);
  nla_put_string(m.get(), IFLA_IFNAME, name);
  nla_put_u32(m.get(), IFLA_MTU, 2044);
  nla_put_u32(m.get(), IFLA_TXQLEN, 256);
  if (!vfs.empty()) {
    nla_put_u32(m.get(), IFLA_NUM_VF, static_cast<std::uint32_t>(vfs.size()));
    nlattr* list = nla_nest_start(m.get(), IFLA_VFINFO_LIST);
    for (const auto& vf : vfs) put_vf(m.get(), vf);
    nla_nest_end(m.get(), list);
  }
  return bytes_of(m.get());
}

Bytes done_message(int error = 0) {
  Message m = new_message(NLMSG_DONE);
  nlmsg_append(m.get(), &error, sizeof error, NLMSG_ALIGNTO);
  return bytes_of(m.get());
}

Bytes error_message(int error) {
  Message m = new_message(NLMSG_ERROR, 0);
  nlmsgerr body{};
  body.error = error;
  nlmsg_append(m.get(), &body, sizeof body, NLMSG_ALIGNTO);
  return bytes_of(m.get());
}

const std::vector<VfSpec> kTwoVfs = {
    {0, 0x10, IFLA_VF_LINK_STATE_AUTO, 1, 0, 1000},
    {1, 0x11, IFLA_VF_LINK_STATE_DISABLE, 0, 1, 2000},
};

// A typical dump datagram: loopback (no VFs), the PF with two VFs, then DONE.
Bytes typical_dump() {
  Bytes dump = newlink(1, "lo", {});
  append(dump, newlink(5, "ibp175s0", kTwoVfs));
  append(dump, done_message());
  return dump;
}

std::string parse_error(const Bytes& bytes) {
  std::vector<PfLink> links;
  try {
    parse_dump_datagram(bytes, kSeq, links);
  } catch (const NetlinkError& e) {
    return e.what();
  }
  return "";
}

// The offset of the first attribute of `type` in the message starting at `at`, searching
// the raw bytes for the nlattr header (type only; the test messages make it unique).
std::size_t find_attribute(const Bytes& bytes, std::uint16_t type, std::size_t from = 0) {
  for (std::size_t i = from; i + 4 <= bytes.size(); i += 4) {
    std::uint16_t t;
    std::memcpy(&t, &bytes[i + 2], 2);
    std::uint16_t len;
    std::memcpy(&len, &bytes[i], 2);
    if ((t & NLA_TYPE_MASK) == type && len >= 4) return i;
  }
  throw std::runtime_error("attribute not found");
}

void set_u16(Bytes& bytes, std::size_t at, std::uint16_t value) {
  std::memcpy(&bytes[at], &value, sizeof value);
}

TEST(SriovNetlink, ParsesADumpWithTwoVfs) {
  std::vector<PfLink> links;
  EXPECT_TRUE(parse_dump_datagram(typical_dump(), kSeq, links));
  ASSERT_EQ(links.size(), 1u);  // lo has no VFs
  const PfLink& pf = links[0];
  EXPECT_EQ(pf.ifindex, 5);
  EXPECT_EQ(pf.ifname, "ibp175s0");
  EXPECT_EQ(pf.num_vf, 2u);
  ASSERT_EQ(pf.vfs.size(), 2u);

  const VfLink& vf0 = pf.vfs[0];
  EXPECT_EQ(vf0.vf, 0u);
  EXPECT_EQ(vf0.mac, "02:00:5e:10:00:10");
  EXPECT_EQ(vf0.link_state, 0u);
  EXPECT_EQ(vf0.spoof_check, true);
  EXPECT_EQ(vf0.trust, false);
  EXPECT_EQ(vf0.node_guid, "0x0c42a10300af1000");
  EXPECT_EQ(vf0.port_guid, "0x0c42a10300af2000");
  ASSERT_TRUE(vf0.stats);
  EXPECT_EQ(vf0.stats->rx_packets, 1001u);
  EXPECT_EQ(vf0.stats->tx_packets, 1002u);
  EXPECT_EQ(vf0.stats->rx_bytes, 1003u);
  EXPECT_EQ(vf0.stats->tx_bytes, 1004u);
  EXPECT_EQ(vf0.stats->broadcast, 1005u);
  EXPECT_EQ(vf0.stats->multicast, 1006u);
  EXPECT_EQ(vf0.stats->rx_dropped, 1007u);
  EXPECT_EQ(vf0.stats->tx_dropped, 1008u);

  const VfLink& vf1 = pf.vfs[1];
  EXPECT_EQ(vf1.vf, 1u);
  EXPECT_EQ(vf1.link_state, 2u);
  EXPECT_EQ(vf1.spoof_check, false);
  EXPECT_EQ(vf1.trust, true);
  EXPECT_EQ(vf1.stats->tx_dropped, 2008u);
}

TEST(SriovNetlink, CountersAbove2To32AndOldKernelsWithoutDropCounters) {
  VfSpec big{3, 0x13, IFLA_VF_LINK_STATE_ENABLE, 0xffffffffu, 0xffffffffu, 0x1234567890ull};
  big.with_dropped = false;
  big.with_guids = false;
  Bytes dump = newlink(9, "ens1f0np0", {big});
  append(dump, done_message());
  std::vector<PfLink> links;
  ASSERT_TRUE(parse_dump_datagram(dump, kSeq, links));
  ASSERT_EQ(links.size(), 1u);
  const VfLink& vf = links[0].vfs.at(0);
  EXPECT_EQ(vf.vf, 3u);
  EXPECT_EQ(vf.stats->rx_bytes, 0x1234567893ull);
  EXPECT_FALSE(vf.stats->rx_dropped);
  EXPECT_FALSE(vf.stats->tx_dropped);
  // -1: the driver does not report these settings.
  EXPECT_FALSE(vf.spoof_check);
  EXPECT_FALSE(vf.trust);
  EXPECT_FALSE(vf.node_guid);
}

TEST(SriovNetlink, ADumpSpreadOverDatagramsEndsOnlyAtDone) {
  std::vector<PfLink> links;
  EXPECT_FALSE(parse_dump_datagram(newlink(5, "ibp175s0", kTwoVfs), kSeq, links));
  EXPECT_FALSE(parse_dump_datagram(newlink(6, "ibp175s1", kTwoVfs), kSeq, links));
  EXPECT_TRUE(parse_dump_datagram(done_message(), kSeq, links));
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1].ifname, "ibp175s1");
}

TEST(SriovNetlink, MessagesOfAnotherSequenceAreSkipped) {
  Bytes stale = newlink(5, "stale0", kTwoVfs);
  nlmsghdr header;
  std::memcpy(&header, stale.data(), sizeof header);
  header.nlmsg_seq = kSeq - 1;
  std::memcpy(stale.data(), &header, sizeof header);
  std::vector<PfLink> links;
  EXPECT_FALSE(parse_dump_datagram(stale, kSeq, links));
  EXPECT_TRUE(links.empty());
}

TEST(SriovNetlink, KernelErrorsAreReportedWithTheirReason) {
  EXPECT_EQ(parse_error(error_message(-EPERM)),
            "the kernel refused the link dump: Operation not permitted");
  EXPECT_EQ(parse_error(done_message(-EMSGSIZE)),
            "the link dump ended with an error: Message too long");
}

TEST(SriovNetlink, AnErrorCodeThatIsNoErrnoIsNamedAsANumber) {
  // INT_MIN cannot be negated (found by fuzz_netlink); a positive code is no -errno either.
  EXPECT_EQ(parse_error(error_message(std::numeric_limits<int>::min())),
            "the kernel refused the link dump: invalid error code -2147483648");
  EXPECT_EQ(parse_error(error_message(5)),
            "the kernel refused the link dump: invalid error code 5");
  EXPECT_EQ(parse_error(done_message(std::numeric_limits<int>::min())),
            "the link dump ended with an error: invalid error code -2147483648");
}

TEST(SriovNetlink, TheRequestAsksForVfInfo) {
  const Bytes request = build_getlink_dump_request(77);
  ASSERT_GE(request.size(), NLMSG_HDRLEN + sizeof(ifinfomsg) + 8);
  nlmsghdr header;
  std::memcpy(&header, request.data(), sizeof header);
  EXPECT_EQ(header.nlmsg_type, RTM_GETLINK);
  EXPECT_EQ(header.nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
  EXPECT_EQ(header.nlmsg_seq, 77u);
  EXPECT_EQ(header.nlmsg_len, request.size());
  const std::size_t at = find_attribute(request, IFLA_EXT_MASK, NLMSG_HDRLEN + sizeof(ifinfomsg));
  std::uint32_t mask;
  std::memcpy(&mask, &request[at + 4], sizeof mask);
  EXPECT_EQ(mask, RTEXT_FILTER_VF);
}

// --- malformed input -----------------------------------------------------------------------

TEST(SriovNetlink, AnAttributeLongerThanItsMessageIsTruncation) {
  Bytes dump = typical_dump();
  const std::size_t pf = find_attribute(dump, IFLA_VFINFO_LIST);
  set_u16(dump, pf, 0xfff0);
  EXPECT_NE(parse_error(dump).find("has length 65520 but only"), std::string::npos)
      << parse_error(dump);
  EXPECT_NE(parse_error(dump).find("(truncated)"), std::string::npos);
}

TEST(SriovNetlink, AnAttributeShorterThanItsHeaderIsRefused) {
  Bytes dump = typical_dump();
  const std::size_t list = find_attribute(dump, IFLA_VFINFO_LIST);
  const std::size_t stats = find_attribute(dump, IFLA_VF_STATS, list);
  set_u16(dump, stats, 2);
  const std::string error = parse_error(dump);
  EXPECT_NE(error.find("IFLA_VF_INFO: attribute type 8 has length 2, less than its own header"),
            std::string::npos)
      << error;
}

TEST(SriovNetlink, AStructTooShortForItsTypeIsRefused) {
  Message m = new_message(RTM_NEWLINK);
  ifinfomsg header{};
  header.ifi_index = 5;
  nlmsg_append(m.get(), &header, sizeof header, NLMSG_ALIGNTO);
  nla_put_string(m.get(), IFLA_IFNAME, "ibp175s0");
  nlattr* list = nla_nest_start(m.get(), IFLA_VFINFO_LIST);
  nlattr* info = nla_nest_start(m.get(), IFLA_VF_INFO);
  const std::uint32_t only_index = 0;  // ifla_vf_trust is 8 bytes: index and setting
  nla_put(m.get(), IFLA_VF_TRUST, sizeof only_index, &only_index);
  nla_nest_end(m.get(), info);
  nla_nest_end(m.get(), list);
  EXPECT_NE(parse_error(bytes_of(m.get()))
                .find("IFLA_VF_INFO: IFLA_VF_TRUST payload is 4 bytes, expected at least 8"),
            std::string::npos)
      << parse_error(bytes_of(m.get()));
}

TEST(SriovNetlink, ACounterOfTheWrongWidthIsRefused) {
  Message m = new_message(RTM_NEWLINK);
  ifinfomsg header{};
  nlmsg_append(m.get(), &header, sizeof header, NLMSG_ALIGNTO);
  nlattr* list = nla_nest_start(m.get(), IFLA_VFINFO_LIST);
  nlattr* info = nla_nest_start(m.get(), IFLA_VF_INFO);
  ifla_vf_mac mac{};
  nla_put(m.get(), IFLA_VF_MAC, sizeof mac, &mac);
  nlattr* stats = nla_nest_start(m.get(), IFLA_VF_STATS);
  nla_put_u32(m.get(), IFLA_VF_STATS_RX_BYTES, 7);
  nla_nest_end(m.get(), stats);
  nla_nest_end(m.get(), info);
  nla_nest_end(m.get(), list);
  EXPECT_NE(parse_error(bytes_of(m.get())).find("IFLA_VF_STATS: counter type 2 is 4 bytes"),
            std::string::npos)
      << parse_error(bytes_of(m.get()));
}

TEST(SriovNetlink, VfStructsThatDisagreeOnTheIndexAreRefused) {
  Message m = new_message(RTM_NEWLINK);
  ifinfomsg header{};
  nlmsg_append(m.get(), &header, sizeof header, NLMSG_ALIGNTO);
  nlattr* list = nla_nest_start(m.get(), IFLA_VFINFO_LIST);
  nlattr* info = nla_nest_start(m.get(), IFLA_VF_INFO);
  ifla_vf_mac mac{};
  mac.vf = 1;
  nla_put(m.get(), IFLA_VF_MAC, sizeof mac, &mac);
  ifla_vf_trust trust{2, 1};
  nla_put(m.get(), IFLA_VF_TRUST, sizeof trust, &trust);
  nla_nest_end(m.get(), info);
  nla_nest_end(m.get(), list);
  EXPECT_NE(parse_error(bytes_of(m.get())).find("VF index 2 disagrees with 1"), std::string::npos);
}

TEST(SriovNetlink, AnInterfaceNameWithoutNulIsRefused) {
  Message m = new_message(RTM_NEWLINK);
  ifinfomsg header{};
  nlmsg_append(m.get(), &header, sizeof header, NLMSG_ALIGNTO);
  nla_put(m.get(), IFLA_IFNAME, 4, "eth0");
  EXPECT_NE(parse_error(bytes_of(m.get())).find("IFLA_IFNAME is not NUL-terminated"),
            std::string::npos);
}

TEST(SriovNetlink, BadMessageLengthsAreRefused) {
  Bytes dump = typical_dump();
  nlmsghdr header;
  std::memcpy(&header, dump.data(), sizeof header);
  header.nlmsg_len = 8;
  Bytes short_header = dump;
  std::memcpy(short_header.data(), &header, sizeof header);
  EXPECT_NE(parse_error(short_header).find("netlink message length 8 does not fit"),
            std::string::npos);
  header.nlmsg_len = static_cast<std::uint32_t>(dump.size() + 4);
  Bytes long_message = dump;
  std::memcpy(long_message.data(), &header, sizeof header);
  EXPECT_NE(parse_error(long_message).find("does not fit the"), std::string::npos);

  Bytes tiny(10, 0);
  EXPECT_NE(parse_error(tiny).find("truncated netlink message header: 10 bytes left"),
            std::string::npos);
}

// The datagram cut at every length: the kernel never sends that, but a parser that reads
// past the end would be caught here (and by ASan in the sanitizer build). Each cut must either
// parse (cuts between messages) or fail with a NetlinkError.
TEST(SriovNetlink, EveryTruncationFailsCleanly) {
  const Bytes dump = typical_dump();
  int refused = 0;
  for (std::size_t size = 0; size < dump.size(); ++size) {
    Bytes cut(dump.begin(), dump.begin() + static_cast<std::ptrdiff_t>(size));
    std::vector<PfLink> links;
    try {
      EXPECT_FALSE(parse_dump_datagram(cut, kSeq, links)) << "DONE is the last message";
    } catch (const NetlinkError& e) {
      ++refused;
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  // Only the cuts at the two message boundaries (and the empty datagram) parse.
  EXPECT_EQ(refused, static_cast<int>(dump.size()) - 3);
}

// Random bytes overwritten anywhere: parsing throws NetlinkError or succeeds, nothing else.
TEST(SriovNetlink, CorruptedBytesNeverCrash) {
  const Bytes dump = typical_dump();
  std::mt19937 random(12345);
  for (int round = 0; round < 20000; ++round) {
    Bytes bad = dump;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < edits; ++i) {
      bad[random() % bad.size()] = static_cast<std::uint8_t>(random());
    }
    std::vector<PfLink> links;
    try {
      parse_dump_datagram(bad, kSeq, links);
    } catch (const NetlinkError&) {
    }
  }
}

// --- receiving ---------------------------------------------------------------------------

// A datagram socket pair standing in for the netlink socket: the test writes the kernel's
// side.
class SocketPair {
 public:
  SocketPair() {
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fds_) != 0) {
      throw std::runtime_error("socketpair failed");
    }
    const int size = 1 << 20;
    ::setsockopt(fds_[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  }
  ~SocketPair() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int reader() const { return fds_[0]; }
  void send(const Bytes& datagram) const {
    ASSERT_EQ(::send(fds_[1], datagram.data(), datagram.size(), 0),
              static_cast<ssize_t>(datagram.size()));
  }

 private:
  int fds_[2];
};

TEST(SriovNetlinkReceive, NothingArrivingCostsAtMostTheTimeout) {
  SocketPair pair;
  const auto timeout = std::chrono::milliseconds(150);
  const auto start = std::chrono::steady_clock::now();
  try {
    receive_dump(pair.reader(), kSeq, start + timeout, timeout);
    ADD_FAILURE() << "no exception";
  } catch (const NetlinkError& e) {
    EXPECT_STREQ(e.what(), "no answer to RTM_GETLINK within 150ms");
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(140));
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST(SriovNetlinkReceive, ADumpWithoutDoneHitsTheDeadline) {
  SocketPair pair;
  pair.send(newlink(5, "ibp175s0", kTwoVfs));
  const auto timeout = std::chrono::milliseconds(100);
  EXPECT_THROW(
      receive_dump(pair.reader(), kSeq, std::chrono::steady_clock::now() + timeout, timeout),
      NetlinkError);
}

// 200 VFs make a datagram of about 50 KB, more than the first receive buffer: its size is
// peeked, the buffer grows, nothing is truncated. (The kernel cannot send much more for one
// link: IFLA_VFINFO_LIST is one attribute, and an attribute's length is 16 bits.) A stale
// answer of another sequence comes first.
TEST(SriovNetlinkReceive, LargeDatagramsAreReadWhole) {
  std::vector<VfSpec> many;
  for (std::uint32_t i = 0; i < 200; ++i) {
    many.push_back({i, static_cast<std::uint8_t>(i), IFLA_VF_LINK_STATE_AUTO, 1, 0, i * 10ull});
  }
  const Bytes big = newlink(5, "ibp175s0", many);
  ASSERT_GT(big.size(), 32768u);
  SocketPair pair;
  Bytes stale = newlink(4, "old0", kTwoVfs);
  nlmsghdr header;
  std::memcpy(&header, stale.data(), sizeof header);
  header.nlmsg_seq = kSeq + 1;
  std::memcpy(stale.data(), &header, sizeof header);
  pair.send(stale);
  pair.send(big);
  pair.send(done_message());
  const auto timeout = std::chrono::milliseconds(2000);
  const auto links =
      receive_dump(pair.reader(), kSeq, std::chrono::steady_clock::now() + timeout, timeout);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].ifname, "ibp175s0");
  ASSERT_EQ(links[0].vfs.size(), 200u);
  EXPECT_EQ(links[0].vfs[199].vf, 199u);
  EXPECT_EQ(links[0].vfs[199].stats->tx_dropped, 1998u);
}

}  // namespace
}  // namespace ibfabric::sriov
