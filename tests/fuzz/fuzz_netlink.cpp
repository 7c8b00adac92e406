// libFuzzer target: the rtnetlink dump parser of the sriov collector (sriov_netlink.h), which
// reads what the kernel sends. NetlinkError is the expected answer to malformed bytes; anything
// else (a crash, a sanitizer report, another exception) is a bug. The input is one datagram of a
// dump answer to sequence number 1.

#include "collectors/sriov/sriov_netlink.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<ibfabric::sriov::PfLink> links;
  try {
    (void)ibfabric::sriov::parse_dump_datagram(std::span<const std::uint8_t>(data, size), 1, links);
  } catch (const ibfabric::sriov::NetlinkError&) {
  }
  return 0;
}
