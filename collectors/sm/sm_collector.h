#pragma once
// The `sm` collector: for every local InfiniBand port, the Subnet Manager the port points at
// (PortInfo.MasterSMLID, then SMInfo from that LID) and every SM of the subnet (the SA's
// SMInfoRecord table, then SMInfo from each of them), plus what this daemon derives over time:
// master changes and a master whose activity count stopped moving. SMInfo and SA Get/GetTable
// only; everything goes through the shared MAD engine. Metrics: docs/collectors.md, "Collector
// `sm`".

#include "collectors/collect_with_ports.h"
#include "collectors/collector.h"
#include "collectors/sm/sm_run.h"
#include "mad/engine.h"
#include "mad/port_listing.h"

#include <memory>
#include <string>
#include <vector>

namespace ibfabric::sm {

// name "sm", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `sm`" (tests/unit/config_keys_test.cpp ties the two).
CollectorSpec spec();

struct SmConfig {
  std::vector<std::string> devices;  // only these CAs; empty: every one
  bool subnet = true;                // also every SM of the subnet (the SA's SMInfoRecord table)
};

// Keeps what lives across runs (SmState) and builds an SmRun per collection.
class SmCollector final : public Collector {
 public:
  // `lister` lists the local ports, off the loop (default: libibumad's, of config.devices),
  // within `listing_deadline`.
  SmCollector(boost::asio::io_context& io, std::function<std::shared_ptr<mad::Engine>()> mad_engine,
              SmConfig config, std::shared_ptr<const NodeNameMap> names,
              mad::PortListing::Lister lister = {},
              std::chrono::nanoseconds listing_deadline = mad::PortListing::kDefaultDeadline);
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

 private:
  mad::ClientHandle mad_;
  SmConfig config_;
  std::shared_ptr<const NodeNameMap> names_;
  mad::PortListing listing_;
  SmState state_;
};

}  // namespace ibfabric::sm
