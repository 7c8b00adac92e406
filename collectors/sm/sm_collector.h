#pragma once
// The `sm` collector: for every local InfiniBand port, the Subnet Manager the port points at
// (PortInfo.MasterSMLID, then SMInfo from that LID) and every SM of the subnet (the SA's
// SMInfoRecord table, then SMInfo from each of them), plus what this daemon derives over time:
// master changes and a master whose activity count stopped moving. SMInfo and SA Get/GetTable
// only; everything goes through the shared MAD engine. Metrics: docs/collectors.md, "Collector
// `sm`".

#include "collectors/collect_with_ports.h"
#include "collectors/collector.h"
#include "collectors/sm/sm_decode.h"
#include "mad/engine.h"
#include "mad/fan_out.h"
#include "mad/port_listing.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ibfabric::sm {

// name "sm", enabled by default, every 15s. Config keys (besides enabled and interval):
//   devices: [mlx5_0, ...]   only these CAs (default: all)
//   subnet: true             also list every SM of the subnet (SA table + SMInfo from each)
CollectorSpec spec();

class SmCollector final : public Collector {
 public:
  // `lister` lists the local ports, off the loop (default: libibumad's, of `devices`), within
  // `listing_deadline`.
  SmCollector(boost::asio::io_context& io,
              std::function<std::shared_ptr<mad::Engine>()> engine_factory,
              std::vector<std::string> devices, bool subnet,
              std::shared_ptr<const NodeNameMap> names, mad::PortListing::Lister lister = {},
              std::chrono::nanoseconds listing_deadline = mad::PortListing::kDefaultDeadline);
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

  using PortKey = std::pair<std::string, int>;  // CA name, port number
  // Failed queries per (device, port, query).
  using ErrorKey = std::tuple<std::string, int, std::string>;

  // What the collector remembers of one local port between polls.
  struct PortMemory {
    MasterTracker master;
    // Every SM of the subnet seen last, by LID: asked again when the SA does not answer (as
    // when the master that hosts it is dead), until the SA gives a new table.
    std::map<std::uint16_t, SmInfo> known_sms;
    // The node name of each SM seen (by its port GUID), so that one that stops answering keeps
    // its name.
    std::map<std::uint64_t, std::string> names;
  };

 private:
  friend class Pass;
  mad::ClientHandle mad_;
  bool subnet_;
  std::shared_ptr<const NodeNameMap> names_;
  mad::PortListing listing_;
  std::map<PortKey, PortMemory> memory_;
  mad::QueryErrors<ErrorKey> errors_;
};

}  // namespace ibfabric::sm
