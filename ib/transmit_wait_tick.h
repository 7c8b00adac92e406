#pragma once
// What one PortXmitWait tick is on a device, so that waiting can be read as a share of time:
// ticks x seconds per tick / seconds. A tick is a number of bytes' transmit time, at the port's
// data rate (`per_lane` false: any width) or at one lane's (`per_lane` true: seconds per tick
// are bytes x width / port rate). Sources, per family (docs/collectors.md#congested-time):
//   NVIDIA ibdiagnet User Manual 2.13, "Congestion Assessment on InfiniBand Links": Quantum,
//     Quantum-2 and Quantum-3 count one tick per 8 bytes of the port, whatever its width;
//     SwitchX, Switch-IB and Switch-IB 2 one per 32 bytes of a lane.
//   Device IDs: rdma-core infiniband-diags (vendstat.c, ibdiag_common.c) and ibnetdiscover
//     output of the switches (Quantum 0xd2f0, Quantum-2 0xd2f2); Quantum-3's 0xd2f4 is derived
//     from its MST name mt54004.
// No public source gives the tick of an HCA (ConnectX); a device not listed has no tick here
// unless the configuration gives one (`transmit_wait_ticks`).

#include "config/config.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace ibfabric {

struct TransmitWaitTick {
  double bytes = 0;
  bool per_lane = false;
};

// The configuration's rules first (the first that matches), then the table above.
std::optional<TransmitWaitTick> transmit_wait_tick(std::uint32_t vendor_id, std::uint32_t device_id,
                                                   const std::vector<TransmitWaitTickRule>& rules);

}  // namespace ibfabric
