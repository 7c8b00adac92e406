// core/transmit_wait_tick: the families whose PortXmitWait tick is published, by NodeInfo
// VendorID and DeviceID, and the configuration's rules before them.
#include "ib/transmit_wait_tick.h"

#include <gtest/gtest.h>

namespace ibfabric {
namespace {

constexpr std::uint32_t kMellanox = 0x0002c9;

std::string tick(std::uint32_t vendor, std::uint32_t device,
                 const std::vector<TransmitWaitTickRule>& rules = {}) {
  auto t = transmit_wait_tick(vendor, device, rules);
  if (!t) return "unknown";
  return std::to_string(static_cast<int>(t->bytes)) + (t->per_lane ? " per lane" : " per port");
}

TEST(TransmitWaitTick, QuantumFamiliesCountEightBytesOfThePort) {
  EXPECT_EQ(tick(kMellanox, 0xd2f0), "8 per port");  // Quantum
  EXPECT_EQ(tick(kMellanox, 0xd2f2), "8 per port");  // Quantum-2
  EXPECT_EQ(tick(kMellanox, 0xd2f4), "8 per port");  // Quantum-3
  EXPECT_EQ(tick(0x00119f, 0x1bf0), "8 per port");   // Bull Sequana Quantum
}

TEST(TransmitWaitTick, SwitchXAndSwitchIbFamiliesCount32BytesOfALane) {
  EXPECT_EQ(tick(kMellanox, 0xc738), "32 per lane");  // SwitchX ...
  EXPECT_EQ(tick(kMellanox, 0xc73b), "32 per lane");  // ... to SwitchX-2
  EXPECT_EQ(tick(kMellanox, 0xc73c), "unknown");
  EXPECT_EQ(tick(kMellanox, 0xcb20), "32 per lane");  // Switch-IB
  EXPECT_EQ(tick(kMellanox, 0xcf08), "32 per lane");  // Switch-IB 2
  EXPECT_EQ(tick(0x00119f, 0x1bd5), "32 per lane");
}

TEST(TransmitWaitTick, HcasAndOtherVendorsAreNotKnownUnlessConfigured) {
  EXPECT_EQ(tick(kMellanox, 0x1021), "unknown");  // ConnectX-7
  EXPECT_EQ(tick(kMellanox, 0x101b), "unknown");  // ConnectX-6
  EXPECT_EQ(tick(0x001175, 0xd2f2), "unknown");   // another vendor's device with that ID
  std::vector<TransmitWaitTickRule> rules{{kMellanox, 0x1021, 8, false},
                                          {kMellanox, 0xd2f2, 32, true}};
  EXPECT_EQ(tick(kMellanox, 0x1021, rules), "8 per port");
  EXPECT_EQ(tick(kMellanox, 0xd2f2, rules), "32 per lane") << "a rule wins over the table";
  EXPECT_EQ(tick(kMellanox, 0xd2f0, rules), "8 per port");
}

}  // namespace
}  // namespace ibfabric
