#pragma once
// The `ports` collector: for every local InfiniBand CA port, its PortInfo and PMA counters,
// and the same for the port at the other end of its cable (found by a one-hop directed route),
// with the peer's identity. Everything goes through the shared MAD engine.
// Metrics are documented in docs/collectors.md, "Collector `ports`".

#include "collectors/collect_with_ports.h"
#include "collectors/collector.h"
#include "collectors/ports/ports_run.h"
#include "mad/engine.h"
#include "mad/port_listing.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric::ports {

// name "ports", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `ports`" (tests/unit/config_keys_test.cpp ties the two).
CollectorSpec spec();

struct PortsConfig {
  std::vector<std::string> devices;
  bool peers = true;
  bool error_details = true;
  std::chrono::nanoseconds link_memory = std::chrono::hours(24);
  // How long the values of one side of a port whose queries were lost (timed out, or any
  // failure) are still reported from the last read. 0: not at all.
  std::chrono::nanoseconds keep_unread = std::chrono::minutes(10);
  // The configuration's PortXmitWait ticks (top-level transmit_wait_ticks), for the devices
  // ib/transmit_wait_tick.h does not know.
  std::vector<TransmitWaitTickRule> transmit_wait_ticks;
};

// Keeps what lives across runs (PortsState) and builds a PortsRun per collection.
class PortsCollector final : public Collector {
 public:
  // `lister` lists the local ports, off the loop (default: libibumad's, of config.devices), within
  // `listing_deadline`.
  PortsCollector(boost::asio::io_context& io,
                 std::function<std::shared_ptr<mad::Engine>()> mad_engine, PortsConfig config,
                 std::shared_ptr<const NodeNameMap> names, mad::PortListing::Lister lister = {},
                 std::chrono::nanoseconds listing_deadline = mad::PortListing::kDefaultDeadline,
                 std::string state_directory = "");
  void collect(Done done) override;
  bool prepare_mad() override { return true; }

 private:
  mad::ClientHandle mad_;
  PortsConfig config_;
  mad::PortListing listing_;
  std::shared_ptr<const NodeNameMap> names_;
  PortsState state_;
  bool state_loaded_ = false;  // the state file is read at the first collection
};

}  // namespace ibfabric::ports
