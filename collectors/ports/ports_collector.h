#pragma once
// The `ports` collector: for every local InfiniBand CA port, its PortInfo and PMA counters,
// and the same for the port at the other end of its cable (found by a one-hop directed route),
// with the peer's identity. Everything goes through the shared MAD engine.
// Metrics are documented in docs/collectors.md, "Collector `ports`".

#include "collectors/collector.h"
#include "collectors/mad/engine.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace ibfabric::ports {

// name "ports", enabled by default, every 15s. Config keys (besides enabled and interval):
//   devices: [mlx5_0, ...]   only these CAs (default: all)
//   peers: true              also read the port on the other end of each link
CollectorSpec spec();

class PortsCollector final : public Collector {
 public:
  PortsCollector(std::function<std::shared_ptr<mad::Engine>()> engine_factory,
                 std::vector<std::string> devices, bool peers);
  void collect(Done done) override;

  // Problems per (device, port, side, attribute): counted since start, logged when a query
  // starts failing and when it works again.
  using ErrorKey = std::tuple<std::string, int, std::string, std::string>;
  void note_result(const ErrorKey& key, const mad::Response& r);

 private:
  friend class Pass;
  mad::ClientHandle mad_;
  std::set<std::string> only_devices_;
  bool peers_;
  std::map<ErrorKey, std::uint64_t> errors_;
  std::set<ErrorKey> failing_;
};

}  // namespace ibfabric::ports
