#include "ib/transmit_wait_tick.h"

#include <array>

namespace ibfabric {

namespace {

constexpr std::uint32_t kMellanox = 0x0002c9;
constexpr std::uint32_t kBull = 0x00119f;  // Bull/Atos OEM switches (rdma-core ibdiag_common.c)

struct Family {
  std::uint32_t vendor_id;
  std::uint32_t first_device_id;
  std::uint32_t last_device_id;
  TransmitWaitTick tick;
};

constexpr TransmitWaitTick kPort8{8, false};   // Quantum family
constexpr TransmitWaitTick kLane32{32, true};  // SwitchX and Switch-IB families

constexpr std::array kFamilies{
    Family{kMellanox, 0xd2f0, 0xd2f0, kPort8},   // Quantum (HDR)
    Family{kMellanox, 0xd2f2, 0xd2f2, kPort8},   // Quantum-2 (NDR)
    Family{kMellanox, 0xd2f4, 0xd2f4, kPort8},   // Quantum-3 (XDR)
    Family{kMellanox, 0xc738, 0xc73b, kLane32},  // SwitchX, SwitchX-2
    Family{kMellanox, 0xcb20, 0xcb20, kLane32},  // Switch-IB
    Family{kMellanox, 0xcf08, 0xcf08, kLane32},  // Switch-IB 2
    Family{kBull, 0x1bf0, 0x1bf0, kPort8},       // Bull Sequana Quantum
    Family{kBull, 0x1ba0, 0x1ba0, kLane32},      // Bull Switch-IB / Switch-IB 2
    Family{kBull, 0x1bd0, 0x1bd5, kLane32},
    Family{kBull, 0x1b02, 0x1b02, kLane32},  // Bull SwitchX
    Family{kBull, 0x1b50, 0x1b50, kLane32},
};

}  // namespace

std::optional<TransmitWaitTick> transmit_wait_tick(std::uint32_t vendor_id, std::uint32_t device_id,
                                                   const std::vector<TransmitWaitTickRule>& rules) {
  for (const auto& rule : rules) {
    if (rule.vendor_id == vendor_id && rule.device_id == device_id) {
      return TransmitWaitTick{rule.bytes, rule.per_lane};
    }
  }
  for (const auto& family : kFamilies) {
    if (family.vendor_id == vendor_id && device_id >= family.first_device_id &&
        device_id <= family.last_device_id) {
      return family.tick;
    }
  }
  return std::nullopt;
}

}  // namespace ibfabric
