#pragma once
// The SR-IOV view of rtnetlink: one RTM_GETLINK dump with IFLA_EXT_MASK = RTEXT_FILTER_VF, and
// pure parsers for the bytes it answers with. The parsers never trust a length: every
// malformed or truncated message or attribute throws NetlinkError naming what was wrong and
// where, so a bad answer costs one collection's netlink values, never the process.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ibfabric::sriov {

class NetlinkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// IFLA_VF_STATS, each value as the driver reports it; absent when the kernel did not send it
// (rx/tx dropped only exist since Linux 5.6).
struct VfStats {
  std::optional<std::uint64_t> rx_packets;
  std::optional<std::uint64_t> tx_packets;
  std::optional<std::uint64_t> rx_bytes;
  std::optional<std::uint64_t> tx_bytes;
  std::optional<std::uint64_t> broadcast;
  std::optional<std::uint64_t> multicast;
  std::optional<std::uint64_t> rx_dropped;
  std::optional<std::uint64_t> tx_dropped;
};

// One IFLA_VF_INFO. Settings the driver does not report (the kernel sends -1 for spoof check
// and trust then) are nullopt.
struct VfLink {
  std::uint32_t vf = 0;
  std::optional<std::string> mac;           // "aa:bb:cc:dd:ee:ff" (first 6 of IFLA_VF_MAC's bytes)
  std::optional<std::uint32_t> link_state;  // IFLA_VF_LINK_STATE_AUTO/ENABLE/DISABLE: 0/1/2
  std::optional<bool> spoof_check;
  std::optional<bool> trust;
  std::optional<std::string> node_guid;  // "0x" + 16 hex digits (IFLA_VF_IB_NODE_GUID)
  std::optional<std::string> port_guid;  // IFLA_VF_IB_PORT_GUID
  std::optional<VfStats> stats;
};

// A link of the dump that has VFs (IFLA_NUM_VF > 0 or an IFLA_VFINFO_LIST).
struct PfLink {
  std::int32_t ifindex = 0;
  std::string ifname;
  std::optional<std::uint32_t> num_vf;
  std::vector<VfLink> vfs;
};

// The request: RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, AF_UNSPEC, IFLA_EXT_MASK =
// RTEXT_FILTER_VF (without it the kernel leaves out IFLA_VFINFO_LIST).
std::vector<std::uint8_t> build_getlink_dump_request(std::uint32_t sequence);

// Parses one datagram of the dump answer: every RTM_NEWLINK with VFs is appended to `links`.
// Returns true when the datagram ends the dump (NLMSG_DONE). Messages of another sequence
// number are skipped. Throws NetlinkError on malformed bytes or an NLMSG_ERROR answer.
bool parse_dump_datagram(std::span<const std::uint8_t> datagram, std::uint32_t sequence,
                         std::vector<PfLink>& links);

// Parses one RTM_NEWLINK payload (the bytes after the nlmsghdr: ifinfomsg and attributes).
// nullopt for a link without VFs. Throws NetlinkError on malformed bytes.
std::optional<PfLink> parse_newlink(std::span<const std::uint8_t> payload);

// Sends the request on a fresh NETLINK_ROUTE socket and reads the whole dump. Every receive
// is bounded by SO_RCVTIMEO set to what is left of `timeout`, so a kernel that does not answer
// costs at most `timeout`. Throws NetlinkError on any failure.
// `stand_in`, when not empty, is the path of a unix SOCK_SEQPACKET socket that plays the
// kernel instead (the tests' seam at the socket: a fake that answers late or never; set by
// the environment variable IBFABRIC_SRIOV_NETLINK_SOCKET).
std::vector<PfLink> dump_links_with_vfs(std::chrono::milliseconds timeout,
                                        const std::string& stand_in = "");

// The receiving half of dump_links_with_vfs, on any datagram socket `fd` (tests use a
// socketpair): reads datagrams until NLMSG_DONE of `sequence`, each receive bounded by
// SO_RCVTIMEO = what is left until `deadline`; `timeout` only words the error.
std::vector<PfLink> receive_dump(int fd, std::uint32_t sequence,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::chrono::milliseconds timeout);

}  // namespace ibfabric::sriov
