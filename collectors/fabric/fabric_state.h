#pragma once
// What the `fabric` collector keeps from one run to the next, in one plain struct: the collector
// (fabric_collector.h) owns it and starts the runs, and each run (DiscoveryRun, SweepRun) gets a
// reference to it, reads it and updates it on the loop. A run never outlives it: its queries go
// through `mad`, whose Client drops their callbacks when the collector goes.

#include "collectors/fabric/fabric_config.h"
#include "collectors/fabric/fabric_model.h"
#include "collectors/fabric/link_memory.h"
#include "collectors/fan_out.h"
#include "config/config.h"
#include "core/metrics.h"
#include "core/node_names.h"
#include "ib/state_store.h"
#include "mad/attributes.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibfabric::fabric {

// A PMA attribute the sweep reads of every switch port only when the configuration asks for it
// (error_details' two, vl_transmit_wait's one). A PMA that rejects it (MAD status) costs only its
// series, not the port; a query of it that gets no answer fails the port, and its last answer
// is reported for keep_unread, as the port's other parts are.
struct OptionalAttribute {
  std::uint16_t attribute;  // IB_GSI_PORT_RCV_ERROR_DETAILS, ...
  const char* name;         // for error counting: "port_rcv_error_details"
  std::size_t octets;       // the leading octets of an answer its decoders read
};

// The sweep's optional attributes, in the order a port's values and memory keep them: the
// error details first (mad::detail_attributes() order, as mad::add_detail_counters() reads
// them), then PortVLXmitWaitCounters.
inline std::vector<OptionalAttribute> optional_attributes(const FabricConfig& config) {
  std::vector<OptionalAttribute> out;
  if (config.error_details) {
    const auto& details = mad::detail_attributes();
    for (std::size_t a = 0; a < details.size(); ++a) {
      out.push_back({details[a].attribute, details[a].name, mad::detail_octets(a)});
    }
  }
  if (config.vl_transmit_wait) {
    out.push_back({IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS, "port_vl_xmit_wait_counters",
                   mad::port_vl_xmit_wait_octets()});
  }
  return out;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct FabricState {
  FabricState(boost::asio::io_context& io, std::function<std::shared_ptr<mad::Engine>()> mad_engine,
              FabricConfig config, std::shared_ptr<const NodeNameMap> names,
              std::string state_directory)
      : mad(std::move(mad_engine)),
        config(std::move(config)),
        optional(optional_attributes(this->config)),
        names(std::move(names)),
        state(io, std::move(state_directory), "fabric"),
        errors("fabric") {}

  using TimePoint = std::chrono::steady_clock::time_point;

  // Counts a failed query under (phase, attribute) and logs once per `subject` (a switch GUID
  // or a route) and attribute when it starts failing, and again when it works. (Defined in
  // fabric_collector.cpp.)
  void note_result(const char* phase, const char* attribute,
                   const std::function<std::string()>& subject, const mad::Response& r);

  // An attribute's data between sweeps: only the octets the counter decoders read (reserved
  // and unused fields are most of a PMA attribute's 192), packed without their zero octets
  // (pack_octets), in the switch's one buffer (no allocation per port and attribute), and the
  // size it is restored to, zero-filled, when used.
  struct Kept {
    std::uint32_t offset = 0;   // into SwitchMemory::bytes
    std::uint16_t covered = 0;  // octets packed there
    std::uint16_t size = 0;     // 0: nothing kept
    TimePoint at;
  };
  struct PortMemory {
    std::optional<mad::PortInfo> port_info;
    TimePoint port_info_at;
    Kept basic, extended;
  };
  struct SwitchMemory {
    std::vector<PortMemory> ports;  // index = port number - 1
    // Each port's optional attributes, in FabricState::optional order: port (number - 1) times
    // their number, plus the attribute. One vector a switch, not one a port (24 octets a port,
    // and an allocation a port with an opt-in on).
    std::vector<Kept> optional;
    std::vector<std::uint8_t> bytes;  // what every port's Kept parts hold
  };

  // Never the engine itself (seen without: SIGSEGV on SIGTERM mid-sweep; see ClientHandle).
  mad::ClientHandle mad;
  FabricConfig config;
  const std::vector<OptionalAttribute> optional;  // optional_attributes(config)
  // Where PortVLXmitWaitCounters is in `optional`, when vl_transmit_wait is on.
  std::optional<std::size_t> vl_xmit_wait() const {
    if (!config.vl_transmit_wait) return std::nullopt;
    return optional.size() - 1;
  }
  std::shared_ptr<const NodeNameMap> names;
  // The cables discovery saw (switch end -> far end), kept for link_memory.
  LinkMemory links_seen;

  std::shared_ptr<const Topology> topology;  // from the last discovery that reached anything
  std::uint64_t topology_version = 0;        // + 1 each time `topology` is replaced
  // What every sweep reuses until the topology or the link memory changes: the label set of
  // each swept switch port, and the node and link info families as their compressed text. Most
  // of a sweep's label text never changes; shared, the shown snapshot and the one being built
  // hold it once. Sets are added to the arena only by the first sweep of a topology (a new
  // topology gets a new cache), so no shown snapshot reads an arena that is still growing.
  struct LabelCache {
    // What it was made for: FabricState::topology_version (0: none yet), links_version, and
    // the switches swept with their number of ports. Not the topology itself, which would
    // keep the last one alive beside a new discovery's.
    std::uint64_t topology_version = 0;
    std::uint64_t links_version = 0;
    std::vector<std::pair<std::uint64_t, int>> swept;
    std::shared_ptr<LabelArena> arena = std::make_shared<LabelArena>();
    std::map<std::uint64_t, std::vector<const LabelSet*>> ports;  // per switch: port - 1
    // Compressed by FabricCollector::compress_info() (their samples when it could not start).
    std::shared_ptr<const MetricFamilies> info = std::make_shared<const MetricFamilies>();
  };
  LabelCache labels;
  std::uint64_t links_version = 0;  // changes with links_seen
  int sweeps_since_discovery = 0;
  bool rediscover = true;
  std::map<std::uint64_t, mad::PmaCapabilities> pma_caps;  // per switch, until rediscovery
  // Steady sweeps left that do not ask the SA at `table_skipped_lid` for its PortInfoRecord
  // table, because its last gave no record the sweep could use (SweepRun::kSweepsWithoutTable).
  int table_sweeps_skipped = 0;
  std::uint16_t table_skipped_lid = 0;
  // Samples per family of the last sweep: the next one reserves them (MetricsBuilder).
  MetricsBuilder::SizeHints family_sizes;
  // Compressed octets of each family the last sweep compressed part by part: the next one
  // reserves them, where appending its parts would grow the text by doubling.
  MetricsBuilder::SizeHints sealed_octets;
  // The last ClassPortInfo each switch answered, kept across discoveries: used when the query
  // is lost, so that a lost MAD does not cost every counter of the switch.
  std::map<std::uint64_t, mad::PmaCapabilities> last_caps;
  std::map<std::uint64_t, SwitchMemory> memory;  // per swept switch
  // When each node was last found by a discovery or (a switch) answered a sweep query.
  std::map<std::uint64_t, TimePoint> last_seen;
  std::map<std::uint64_t, std::uint64_t> switch_timeouts;  // sweep queries timed out, per switch
  state::StateStore state;

  std::uint64_t discoveries = 0;
  double discovery_seconds = 0;
  double discovery_timestamp = 0;
  // (phase, attribute): string literals, and the names of mad::detail_attributes().
  QueryErrors<std::pair<std::string_view, std::string_view>> errors;
};

}  // namespace ibfabric::fabric
