#pragma once
// One discovery of the `fabric` collector: a directed-route breadth-first search from the
// engine's default port. Every node found is asked for its NodeDescription (and a switch for its
// port 0 PortInfo) and, if it is a switch, for the PortInfo of every port; through every port
// whose physical state is LinkUp and whose far end is not known yet goes a NodeInfo one hop
// further. A GUID seen before ends that branch but still records the link (both ends). The
// engine paces it; the PortInfo queries wait here for room (below). What the collector does
// with the topology found (fill_unanswered, carry_missed, link memory) is its own.

#include "collectors/fabric/fabric_model.h"
#include "collectors/fabric/fabric_state.h"
#include "collectors/fan_out.h"
#include "mad/engine.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ibfabric::fabric {

class DiscoveryRun : public FanOut {
 public:
  // The topology found, and how many of the discovery's queries failed.
  using Finished = std::function<void(std::shared_ptr<Topology>, int)>;
  // Made with std::make_shared (a FanOut); `kept` gives the engine's Client, max_hops and the
  // error counts.
  DiscoveryRun(FabricState& kept, Finished finished);

  void start();

 private:
  void ask(const char* attribute, const std::string& subject, mad::Request req,
           std::function<void(const mad::Response&)> on_ok);

  // A PortInfo query is handed to the engine only while fewer than kPortInfosOut of the
  // discovery's queries are out, one port of each waiting node in turn: a level of a fat tree
  // asked at once queued a request (about 1 KiB) per port of the level, and taking turns spreads
  // the queries out over many destinations, which the engine serves 4 at a time each.
  static constexpr int kPortInfosOut = 256;

  struct WaitingPorts {
    std::uint64_t guid;
    std::shared_ptr<const std::vector<std::uint8_t>> route;
    int next, last;  // ports next..last are still to be asked
  };

  void ask_port_infos();
  void settled() override;

  // NodeInfo of whatever is at `route`, reached out of port `parent_port` of `parent_guid`
  // (route {}: the local node; no parent).
  void node_info(std::vector<std::uint8_t> route, std::uint64_t parent_guid, int parent_port);
  void explore(std::uint64_t guid, int type, int num_ports, const std::vector<std::uint8_t>& route);
  void port_info(std::uint64_t guid, int p,
                 const std::shared_ptr<const std::vector<std::uint8_t>>& route_of_node);

  FabricState& kept_;
  int asking_ = 0;  // queries of this discovery not settled yet
  std::deque<WaitingPorts> waiting_;
  int local_port_ = 0;
  int failed_ = 0;
  Finished finished_;
  std::shared_ptr<Topology> topology_ = std::make_shared<Topology>();
};

}  // namespace ibfabric::fabric
