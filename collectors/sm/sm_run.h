#pragma once
// One run of the `sm` collector (SmRun) and what it keeps from run to run (SmState, owned by the
// SmCollector; SMInfo's own SMState field is SmInfoState, in sm_decode.h). The collector lists
// the local ports and builds an SmRun per collection; the run reads and updates the state.
// Metrics: docs/collectors.md, "Collector `sm`".

#include "collectors/collector.h"
#include "collectors/fan_out.h"
#include "collectors/sm/sm_decode.h"
#include "core/metrics.h"
#include "core/node_names.h"
#include "mad/engine.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ibfabric::sm {

using PortKey = std::pair<std::string, int>;  // CA name, port number
// Failed queries per (device, port, query).
using ErrorKey = std::tuple<std::string, int, std::string>;

struct SmConfig;

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

// What the collector keeps across runs.
struct SmState {
  std::map<PortKey, PortMemory> memory;
  QueryErrors<ErrorKey> errors{"sm"};
};

// One collection: every port's queries in flight at once, metrics built when the last is back.
// Made with std::make_shared, then start().
class SmRun : public FanOut {
 public:
  SmRun(mad::ClientHandle& mad, const SmConfig& config, const NodeNameMap& names, SmState& state,
        Collector::Done done, std::vector<mad::LocalPort> ports);

  void start();

 private:
  // What one SM of the subnet gave in this pass.
  struct SubnetSm {
    std::optional<SmInfo> answer;      // SMInfo from the SM itself
    std::optional<SmInfo> sa_record;   // the SA's record of it, this pass
    std::optional<SmInfo> remembered;  // what an earlier pass saw, when neither of the above
  };

  struct PortPass {
    mad::LocalPort local;
    bool port_info_answered = false;
    std::uint16_t lid = 0;
    std::uint16_t sm_lid = 0;
    bool master_asked = false;
    std::optional<SmInfo> master;  // SMInfo from the SM at sm_lid
    bool sa_asked = false;
    bool sa_answered = false;
    std::map<std::uint16_t, SubnetSm> subnet;
    std::map<std::uint16_t, std::string> names;  // node name of the SM at each LID, this pass
    std::vector<std::string> problems;           // make the pass a failure
  };

  void ask(std::size_t i, const char* query, std::size_t min_size, mad::Request req,
           std::function<void(const mad::Response&)> on_ok,
           std::function<void(const mad::Response&)> on_fail);
  void query_port_info(std::size_t i);
  void query_master(std::size_t i);
  void query_sa(std::size_t i);
  void query_subnet_sms(std::size_t i);
  void query_name(std::size_t i, std::uint16_t lid);

  std::string sm_name(PortPass& pp, PortMemory& memory, std::uint16_t lid, std::uint64_t port_guid);
  void emit_port(MetricsBuilder& out, PortPass& pp);
  void settled() override;

  const SmConfig& config_;
  const NodeNameMap& names_;
  SmState& s_;
  Collector::Done done_;
  std::vector<PortPass> ports_;
};

}  // namespace ibfabric::sm
