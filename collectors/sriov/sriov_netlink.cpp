#include "collectors/sriov/sriov_netlink.h"

#include "core/metrics.h"

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

namespace ibfabric::sriov {
namespace {

using Bytes = std::span<const std::uint8_t>;

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

template <typename T>
T load(Bytes bytes, std::size_t offset = 0) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

// One attribute: its type without the nested/byte-order flags, and its payload.
struct Attribute {
  std::uint16_t type = 0;
  Bytes payload;
};

// Walks a run of netlink attributes, refusing any length that does not fit. `where` names the
// enclosing structure in error messages ("IFLA_VF_INFO").
class AttributeReader {
 public:
  // `where` is copied: callers build it on the fly.
  AttributeReader(Bytes bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {}

  bool next(Attribute& attribute) {
    const std::size_t left = bytes_.size() - offset_;
    if (left == 0) return false;
    if (left < sizeof(nlattr)) {
      fail("truncated attribute header: " + std::to_string(left) + " bytes left, need " +
           std::to_string(sizeof(nlattr)));
    }
    const auto header = load<nlattr>(bytes_, offset_);
    if (header.nla_len < sizeof(nlattr)) {
      fail("attribute type " + std::to_string(header.nla_type & NLA_TYPE_MASK) + " has length " +
           std::to_string(header.nla_len) + ", less than its own header");
    }
    if (header.nla_len > left) {
      fail("attribute type " + std::to_string(header.nla_type & NLA_TYPE_MASK) + " has length " +
           std::to_string(header.nla_len) + " but only " + std::to_string(left) +
           " bytes are left (truncated)");
    }
    attribute.type = header.nla_type & NLA_TYPE_MASK;
    attribute.payload = bytes_.subspan(offset_ + sizeof(nlattr), header.nla_len - sizeof(nlattr));
    at_ = offset_;
    // The last attribute's padding may be missing.
    offset_ = std::min(bytes_.size(), offset_ + align4(header.nla_len));
    return true;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw NetlinkError(where_ + ": " + what + " (at byte " + std::to_string(offset_) + " of " +
                       std::to_string(bytes_.size()) + ")");
  }

  // A payload of at least `size` bytes (kernels may append fields to the structs).
  void need(const Attribute& attribute, std::size_t size, std::string_view name) const {
    if (attribute.payload.size() < size) {
      throw NetlinkError(where_ + ": " + std::string(name) + " payload is " +
                         std::to_string(attribute.payload.size()) + " bytes, expected at least " +
                         std::to_string(size) + " (at byte " + std::to_string(at_) + ")");
    }
  }

 private:
  Bytes bytes_;
  std::string where_;
  std::size_t offset_ = 0;
  std::size_t at_ = 0;
};

// Netlink carries -errno; anything else in that field (INT_MIN would overflow on negation) is
// named as the number it is.
std::string netlink_error_text(int code) {
  if (code < 0 && code > -4096) return std::strerror(-code);
  return "invalid error code " + std::to_string(code);
}

std::string mac_text(const std::uint8_t* mac) {
  char text[18];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return text;
}

// The -1 the kernel leaves in spoofchk and trust when the driver does not report them.
std::optional<bool> setting(std::uint32_t value) {
  if (value == 0xffffffffu) return std::nullopt;
  return value != 0;
}

VfStats parse_vf_stats(Bytes bytes) {
  VfStats stats;
  AttributeReader reader(bytes, "IFLA_VF_STATS");
  Attribute a;
  while (reader.next(a)) {
    std::optional<std::uint64_t>* slot = nullptr;
    switch (a.type) {
      case IFLA_VF_STATS_RX_PACKETS:
        slot = &stats.rx_packets;
        break;
      case IFLA_VF_STATS_TX_PACKETS:
        slot = &stats.tx_packets;
        break;
      case IFLA_VF_STATS_RX_BYTES:
        slot = &stats.rx_bytes;
        break;
      case IFLA_VF_STATS_TX_BYTES:
        slot = &stats.tx_bytes;
        break;
      case IFLA_VF_STATS_BROADCAST:
        slot = &stats.broadcast;
        break;
      case IFLA_VF_STATS_MULTICAST:
        slot = &stats.multicast;
        break;
      case IFLA_VF_STATS_RX_DROPPED:
        slot = &stats.rx_dropped;
        break;
      case IFLA_VF_STATS_TX_DROPPED:
        slot = &stats.tx_dropped;
        break;
      default:
        continue;  // IFLA_VF_STATS_PAD, and counters newer than this code
    }
    if (a.payload.size() != sizeof(std::uint64_t)) {
      reader.fail("counter type " + std::to_string(a.type) + " is " +
                  std::to_string(a.payload.size()) + " bytes, expected 8");
    }
    *slot = load<std::uint64_t>(a.payload);
  }
  return stats;
}

VfLink parse_vf_info(Bytes bytes) {
  VfLink vf;
  std::optional<std::uint32_t> index;
  // Every IFLA_VF_* struct starts with the VF index; they must agree.
  auto take_index = [&](AttributeReader& reader, Bytes payload) {
    const auto value = load<std::uint32_t>(payload);
    if (index && *index != value) {
      reader.fail("VF index " + std::to_string(value) + " disagrees with " +
                  std::to_string(*index) + " in the same IFLA_VF_INFO");
    }
    index = value;
  };
  AttributeReader reader(bytes, "IFLA_VF_INFO");
  Attribute a;
  while (reader.next(a)) {
    switch (a.type) {
      case IFLA_VF_MAC:
        reader.need(a, sizeof(ifla_vf_mac), "IFLA_VF_MAC");
        take_index(reader, a.payload);
        vf.mac = mac_text(a.payload.data() + offsetof(ifla_vf_mac, mac));
        break;
      case IFLA_VF_LINK_STATE:
        reader.need(a, sizeof(ifla_vf_link_state), "IFLA_VF_LINK_STATE");
        take_index(reader, a.payload);
        vf.link_state = load<ifla_vf_link_state>(a.payload).link_state;
        break;
      case IFLA_VF_SPOOFCHK:
        reader.need(a, sizeof(ifla_vf_spoofchk), "IFLA_VF_SPOOFCHK");
        take_index(reader, a.payload);
        vf.spoof_check = setting(load<ifla_vf_spoofchk>(a.payload).setting);
        break;
      case IFLA_VF_TRUST:
        reader.need(a, sizeof(ifla_vf_trust), "IFLA_VF_TRUST");
        take_index(reader, a.payload);
        vf.trust = setting(load<ifla_vf_trust>(a.payload).setting);
        break;
      case IFLA_VF_IB_NODE_GUID:
      case IFLA_VF_IB_PORT_GUID: {
        reader.need(a, sizeof(ifla_vf_guid), "IFLA_VF_IB_*_GUID");
        take_index(reader, a.payload);
        auto guid = hex_guid(load<ifla_vf_guid>(a.payload).guid);
        (a.type == IFLA_VF_IB_NODE_GUID ? vf.node_guid : vf.port_guid) = std::move(guid);
        break;
      }
      case IFLA_VF_STATS:
        vf.stats = parse_vf_stats(a.payload);
        break;
      default:
        break;  // VLAN, rates, RSS query, broadcast address: not exported
    }
  }
  if (!index) reader.fail("no attribute carries the VF index (no IFLA_VF_MAC)");
  vf.vf = *index;
  return vf;
}

}  // namespace

std::optional<PfLink> parse_newlink(Bytes payload) {
  if (payload.size() < sizeof(ifinfomsg)) {
    throw NetlinkError("RTM_NEWLINK: " + std::to_string(payload.size()) +
                       " bytes, too short for struct ifinfomsg (" +
                       std::to_string(sizeof(ifinfomsg)) + ")");
  }
  PfLink link;
  link.ifindex = load<ifinfomsg>(payload).ifi_index;
  const std::string where = "RTM_NEWLINK ifindex " + std::to_string(link.ifindex);
  AttributeReader reader(payload.subspan(NLMSG_ALIGN(sizeof(ifinfomsg))), where);
  bool has_vf_list = false;
  Attribute a;
  while (reader.next(a)) {
    switch (a.type) {
      case IFLA_IFNAME: {
        // NUL-terminated; stop at the first NUL, and refuse a name without one.
        const auto* begin = reinterpret_cast<const char*>(a.payload.data());
        const auto* nul = static_cast<const char*>(std::memchr(begin, 0, a.payload.size()));
        if (nul == nullptr) reader.fail("IFLA_IFNAME is not NUL-terminated");
        link.ifname.assign(begin, nul);
        break;
      }
      case IFLA_NUM_VF:
        reader.need(a, sizeof(std::uint32_t), "IFLA_NUM_VF");
        link.num_vf = load<std::uint32_t>(a.payload);
        break;
      case IFLA_VFINFO_LIST: {
        has_vf_list = true;
        AttributeReader list(a.payload, "IFLA_VFINFO_LIST of " + where);
        Attribute info;
        while (list.next(info)) {
          if (info.type == IFLA_VF_INFO) link.vfs.push_back(parse_vf_info(info.payload));
        }
        break;
      }
      default:
        break;
    }
  }
  if (!has_vf_list && link.num_vf.value_or(0) == 0) return std::nullopt;
  return link;
}

bool parse_dump_datagram(Bytes datagram, std::uint32_t sequence, std::vector<PfLink>& links) {
  std::size_t offset = 0;
  bool done = false;
  while (offset < datagram.size() && !done) {
    const std::size_t left = datagram.size() - offset;
    const std::string at =
        " at byte " + std::to_string(offset) + " of " + std::to_string(datagram.size());
    if (left < sizeof(nlmsghdr)) {
      throw NetlinkError("truncated netlink message header: " + std::to_string(left) +
                         " bytes left" + at);
    }
    const auto header = load<nlmsghdr>(datagram, offset);
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > left) {
      throw NetlinkError("netlink message length " + std::to_string(header.nlmsg_len) +
                         " does not fit the " + std::to_string(left) + " bytes left" + at);
    }
    const Bytes payload = datagram.subspan(offset + NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN);
    offset = std::min(datagram.size(), offset + NLMSG_ALIGN(header.nlmsg_len));
    if (header.nlmsg_seq != sequence) continue;  // a late answer to an earlier request

    switch (header.nlmsg_type) {
      case NLMSG_NOOP:
        break;
      case NLMSG_ERROR: {
        if (payload.size() < sizeof(int)) {
          throw NetlinkError("truncated NLMSG_ERROR" + at);
        }
        const int error = load<int>(payload);
        if (error == 0) break;  // an acknowledgement
        throw NetlinkError("the kernel refused the link dump: " + netlink_error_text(error));
      }
      case NLMSG_DONE:
        // Since Linux 4.x the DONE message carries the dump's error code.
        if (payload.size() >= sizeof(int) && load<int>(payload) < 0) {
          throw NetlinkError("the link dump ended with an error: " +
                             netlink_error_text(load<int>(payload)));
        }
        done = true;
        break;
      case RTM_NEWLINK:
        if (auto link = parse_newlink(payload)) links.push_back(std::move(*link));
        break;
      default:
        throw NetlinkError("unexpected netlink message type " + std::to_string(header.nlmsg_type) +
                           " in a link dump" + at);
    }
  }
  return done;
}

std::vector<std::uint8_t> build_getlink_dump_request(std::uint32_t sequence) {
  std::unique_ptr<nl_msg, decltype(&nlmsg_free)> message(
      nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP), &nlmsg_free);
  if (!message) throw NetlinkError("cannot allocate the netlink request");
  ifinfomsg header{};
  header.ifi_family = AF_UNSPEC;
  if (nlmsg_append(message.get(), &header, sizeof header, NLMSG_ALIGNTO) < 0 ||
      nla_put_u32(message.get(), IFLA_EXT_MASK, RTEXT_FILTER_VF) < 0) {
    throw NetlinkError("cannot build the netlink request");
  }
  nlmsghdr* raw = nlmsg_hdr(message.get());
  raw->nlmsg_seq = sequence;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(raw);
  return {bytes, bytes + raw->nlmsg_len};
}

namespace {

NetlinkError system_error(const std::string& what) {
  return NetlinkError(what + ": " + std::strerror(errno));
}

}  // namespace

std::vector<PfLink> receive_dump(int fd, std::uint32_t sequence,
                                 std::chrono::steady_clock::time_point deadline,
                                 std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  std::vector<PfLink> links;
  std::vector<std::uint8_t> buffer(32768);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw NetlinkError("the link dump did not finish within " + std::to_string(timeout.count()) +
                         "ms");
    }
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(left.count() / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(left.count() % 1000000);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
      throw system_error("cannot set SO_RCVTIMEO");
    }
    // Learn the datagram's size first: a dump datagram with many VFs can exceed any fixed
    // buffer, and a truncated read would lose messages.
    ssize_t size = ::recv(fd, buffer.data(), 0, MSG_PEEK | MSG_TRUNC);
    if (size < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        throw NetlinkError("no answer to RTM_GETLINK within " + std::to_string(timeout.count()) +
                           "ms");
      }
      throw system_error("cannot receive the link dump");
    }
    if (static_cast<std::size_t>(size) > buffer.size()) {
      buffer.resize(static_cast<std::size_t>(size));
    }
    // Room for any sender's address: the test stand-in is a unix socket, whose address is
    // longer than a sockaddr_nl (and recvmsg reports its full length).
    sockaddr_storage from{};
    iovec io{buffer.data(), buffer.size()};
    msghdr header{};
    header.msg_name = &from;
    header.msg_namelen = sizeof from;
    header.msg_iov = &io;
    header.msg_iovlen = 1;
    size = ::recvmsg(fd, &header, 0);
    if (size < 0) {
      if (errno == EINTR) continue;
      throw system_error("cannot receive the link dump");
    }
    if (header.msg_flags & MSG_TRUNC) throw NetlinkError("link dump datagram truncated");
    // Not from the kernel (a unix-socket stand-in, see dump_links_with_vfs, has no nl_pid).
    if (from.ss_family == AF_NETLINK) {
      sockaddr_nl sender{};
      std::memcpy(&sender, &from, sizeof sender);
      if (sender.nl_pid != 0) continue;
    }
    if (parse_dump_datagram(Bytes(buffer.data(), static_cast<std::size_t>(size)), sequence,
                            links)) {
      return links;
    }
  }
}

std::vector<PfLink> dump_links_with_vfs(std::chrono::milliseconds timeout,
                                        const std::string& stand_in) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  // The sequence number only has to tell this socket's answers apart; the clock is enough.
  const auto sequence = static_cast<std::uint32_t>(Clock::now().time_since_epoch().count());
  const auto request = build_getlink_dump_request(sequence);

  if (!stand_in.empty()) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) throw system_error("cannot open a unix socket");
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    sockaddr_un server{};
    server.sun_family = AF_UNIX;
    if (stand_in.size() >= sizeof server.sun_path) {
      throw NetlinkError("netlink stand-in socket path too long: " + stand_in);
    }
    std::memcpy(server.sun_path, stand_in.c_str(), stand_in.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) < 0) {
      throw system_error("cannot connect to the netlink stand-in " + stand_in);
    }
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
      throw system_error("cannot send RTM_GETLINK");
    }
    return receive_dump(fd, sequence, deadline, timeout);
  }

  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) throw system_error("cannot open a NETLINK_ROUTE socket");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) < 0) {
    throw system_error("cannot bind the netlink socket");
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, request.data(), request.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0) {
    throw system_error("cannot send RTM_GETLINK");
  }
  return receive_dump(fd, sequence, deadline, timeout);
}

}  // namespace ibfabric::sriov
