#pragma once
// One sweep of the `fabric` collector over the shard's switches: ClassPortInfo once per switch
// (cached until the next discovery); every port's PortInfo from the SA's PortInfoRecord table
// (one GetTable per sweep; from the discovery itself right after one), by an SMP of its own
// only where the table has no record of it; then PortCounters and/or PortCountersExtended of
// every port (and the optional attributes when on: error details, PortVLXmitWaitCounters), all
// by LID, kSwitchesInFlight switches at a time and at most about kQueriesPerSwitch queries of
// one switch out (docs/design.md, "What each sweep asks" and "Memory of the fabric sweep").
// Builds the collection's result switch by switch (a large one compressed part by part as it
// goes); a port's lost parts are taken from the last values the collector keeps (keep_unread),
// and what it read is kept for the next.

#include "collectors/collector.h"
#include "collectors/fabric/fabric_model.h"
#include "collectors/fabric/fabric_state.h"
#include "collectors/fabric/topology_info.h"
#include "collectors/fan_out.h"
#include "core/metrics.h"
#include "mad/attributes.h"
#include "mad/engine.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::fabric {

class SweepRun : public FanOut {
 public:
  using TimePoint = FabricState::TimePoint;
  // Makes the label cache's info families of a topology, compressed, puts them in the cache,
  // then calls its last argument on the loop (FabricCollector::compress_info).
  using CompressInfo = std::function<void(TopologyInfo, std::function<void()>)>;
  // Compresses a part of the result's families (each with its HELP and TYPE lines or without:
  // `headers`) on a thread of its own, then calls its last argument on the loop with their
  // texts in the same order (FabricCollector::compress_part).
  using Pieces = std::vector<std::shared_ptr<const DeflatedText>>;
  using CompressPart = std::function<void(MetricFamilies part, std::vector<char> headers,
                                          std::function<void(Pieces)> then)>;

  // What one switch port gave, part by part, and when each part was read (between sweeps,
  // FabricState::PortMemory keeps it packed).
  struct PortValues {
    std::optional<mad::PortInfo> port_info;
    std::vector<std::uint8_t> basic;                  // PortCounters data, empty: none
    std::vector<std::uint8_t> extended;               // PortCountersExtended data
    std::vector<std::vector<std::uint8_t>> optional;  // FabricState::optional order
    TimePoint port_info_at, basic_at, extended_at;
    std::vector<TimePoint> optional_at;
  };
  // A part is "lost" when it is missing because a query failed (its own, or one it needed);
  // only a lost part is taken from the port's memory.
  struct PortResult : PortValues {
    bool failed = false;
    bool lost_info = false, lost_basic = false, lost_extended = false;
    std::vector<char> lost_optional;
    std::optional<TimePoint> stale_since;  // the oldest part taken from memory
    // `optional`: how many optional attributes the sweep reads.
    void lose_all(std::size_t optional) {
      lost_info = true;
      lose_counters(optional);
    }
    void lose_counters(std::size_t optional) {
      failed = lost_basic = lost_extended = true;
      lost_optional.assign(optional, 1);
    }
  };
  struct SwitchResult {
    const Node* node;
    std::optional<mad::PmaCapabilities> caps;
    std::vector<PortResult> ports;  // index = port number - 1; from its start to its emission
    bool answered = false;          // any query of this switch answered in this sweep
    bool emitted = false;
    std::size_t next_port = 0;  // index of the first port not asked yet, once caps are known
    // ClassPortInfo never answered: no counters are asked, only the ports' PortInfo.
    bool no_counters = false;
  };

  // Made with std::make_shared (a FanOut). `fresh`: the topology was discovered in this
  // collection, so its PortInfo answers are used instead of asking again. `discovery_ok` false
  // fails the collection with `discovery_error`, whatever the sweep reads.
  SweepRun(FabricState& kept, std::shared_ptr<const Topology> topology, bool fresh,
           Collector::Done done, bool discovery_ok, std::string discovery_error,
           CompressInfo compress_info, CompressPart compress_part);

  void start();

  // Switches whose queries are out at once. Queuing every query of a large fabric at once held
  // them all in memory (about 1 KiB per switch port at 50,000 ports) and could pass the
  // engine's max_queued. The engine keeps 64 MADs out, 4 per destination by default: 16
  // switches can fill them (docs/benchmarks.md has what the window costs in speed).
  static constexpr std::size_t kSwitchesInFlight = 16;
  // Queries of one switch handed to the engine at once: more than the 4 it keeps out per
  // destination, so that it always has the next at hand, but not every port's. Each waiting
  // query costs about 1 KiB (request, callbacks, timer): 16 switches of 36 ports held 1,152
  // of them.
  static constexpr int kQueriesPerSwitch = 12;
  // The SA's PortInfoRecord table is asked once, with this long to answer (ask_port_info_records).
  static constexpr std::chrono::milliseconds kTableTimeout{2000};
  // After a table that gave no record of a swept port whose link is up (the SA failed, did
  // not answer, or sent a table cut short before any such record, as the simulator's shim
  // does), this many steady sweeps ask each port's SMP without asking the SA first: the SM
  // builds the whole table for every query, and a silent SA held each sweep for kTableTimeout.
  static constexpr int kSweepsWithoutTable = 9;
  // Switches whose counters are all in and that wait for the SA's table only: each gives its
  // place in the window to the next switch, up to this many at once. Holding their places
  // left the fabric idle whenever the SA answered after the first 16 switches' counters
  // (docs/design.md, "What each sweep asks"); their answers are a few KiB a switch.
  static constexpr std::size_t kSwitchesWaitingForTable = 48;
  // Once the result holds FabricConfig::seal_samples samples, the samples so far of each family
  // that holds at least this share of them (or was compressed before in this sweep) are
  // compressed while the sweep goes on: the per-port families, not the per-switch ones. A
  // family compressed so is the joined text of its parts.
  static constexpr std::size_t kSealFamilyShare = 64;

 private:
  void begin();
  // The switches this sweep sweeps and their number of ports (FabricState::LabelCache::swept).
  std::vector<std::pair<std::uint64_t, int>> swept_switches() const;

  // Starts the next switch whose queries stay out (one with nothing to ask is passed over).
  void start_next_switch();

  // The SA's PortInfoRecord table (one GetTable to the SM's LID), asked as the sweep starts; the
  // switches' counters are asked meanwhile, and a switch started before the table is in is not
  // finished until it is. A record of a swept switch's port whose link is up is that port's
  // PortInfo in this sweep; where there is none (the SA failed, left the port out, sent a table
  // cut short, or the link is not up) the port's own SMP is asked.
  void ask_port_info_records();
  // Keeps the records of swept switches' ports whose link is up; returns how many.
  std::size_t use_port_info_records(const mad::Response& r);
  // Port index `idx` of switch `i`: its PortInfo from the SA's record, else by its own SMP.
  void port_info(std::size_t i, std::size_t idx);
  // The SA's record of port index `idx` of switch `i` in this sweep, if any.
  const mad::PortInfo* sa_record(std::size_t i, std::size_t idx) const;

  // A switch whose queries have all settled goes into the result now and its answers are
  // freed, so that a sweep holds the raw answers of the switches in flight only. Not before
  // some switch of the sweep answered: a sweep that got nothing back takes nothing from the
  // ports' memory (settled() then emits the switches held back).
  void finish_switch(std::size_t i);
  // After a query of switch `i` settled (pending_[i] counted down): its next ports, its end,
  // or its place in the window given up while only the SA's table holds it.
  void after_query(std::size_t i);

  void emit_finished(SwitchResult& sw, TimePoint now);

  // `on_fail` runs when the query failed (after it was counted).
  void ask(std::size_t i, const char* attribute, mad::Request req,
           std::function<void(const mad::Response&)> on_ok,
           std::function<void(const mad::Response&)> on_fail);

  void query_switch(std::size_t i);
  void query_ports(std::size_t i);

  // Asks for the next ports of the switch while fewer than kQueriesPerSwitch of its queries
  // are out (a port's queries go together).
  void ask_ports(std::size_t i);

  // The parts of the switch's ports that this sweep lost are taken from the port's memory
  // when they were read within keep_unread; each such port records the oldest.
  void recall(SwitchResult& sw, TimePoint now);

  // Keeps what the switch's ports gave (read now or recalled) for the next sweep; a part not
  // read now stays until it is older than keep_unread.
  void remember(const SwitchResult& sw, TimePoint now);

  void emit_switch(MetricsBuilder& out, const SwitchResult& sw, TimePoint now, int& ports_ok,
                   int& ports_failed, int& ports_stale);

  // A port's PortVLXmitWait of each operational data VL (its PortInfo's OperationalVLs), with
  // a saturation series for each value pegged at 0xffff. `port_labels`: the port's set, which
  // the VL's series share.
  void emit_vl_xmit_wait(MetricsBuilder& out, const SwitchResult& sw, std::size_t idx,
                         const std::string& guid, const LabelSet& port_labels);

  // Whether the series budget (`counters`) exports this per-port counter.
  bool exported(std::string_view metric) const;

  void settled() override;
  // The summary series, the result, and the collection's end.
  void finish();

  // A large result's samples so far go to be compressed when there are enough of them
  // (FabricConfig::seal_samples) and no part is out already: at 50,000 switch ports a sweep's
  // samples were 20 MB at its end, the largest part of the daemon's peak (docs/design.md,
  // "Memory of the fabric sweep").
  void maybe_seal();
  // Sends the samples so far of the families to compress (once settling_, only those
  // compressed before); false when there were none.
  bool seal();
  void on_sealed(const std::vector<MetricsBuilder::FamilyId>& ids, Pieces pieces);

  FabricState& kept_;
  std::shared_ptr<const Topology> topology_;
  bool fresh_;  // the topology was discovered in this collection: its PortInfo is current
  Collector::Done done_;
  bool discovery_ok_;
  std::string discovery_error_;
  CompressInfo compress_info_;
  CompressPart compress_part_;
  // The families compressed part by part in this sweep: their text so far.
  struct Sealed {
    std::string name;
    DeflatedText text;
  };
  std::map<MetricsBuilder::FamilyId, Sealed> sealed_;
  bool sealing_ = false;   // a part is out being compressed
  bool settling_ = false;  // every query has settled: the rest is compressed, then finish()
  double sweep_seconds_ = 0;
  std::vector<SwitchResult> switches_;
  // Per switch (switches_ order), per port (port - 1): the SA's PortInfoRecord of this sweep;
  // a switch's are freed when it is emitted.
  std::vector<std::vector<std::optional<mad::PortInfo>>> sa_info_;
  TimePoint sa_at_;                      // when the SA answered
  bool sa_pending_ = false;              // the SA's table is asked and not in yet
  std::vector<std::size_t> sa_waiting_;  // switches started meanwhile
  std::vector<char> gave_up_place_;      // per switch: started the next while waiting (above)
  std::size_t giving_up_place_ = 0;      // such switches not finished yet
  std::vector<int> pending_;             // queries of each switch not settled yet
  std::size_t next_switch_ = 0;          // the first switch not started
  bool any_answered_ = false;            // some query of this sweep was answered
  std::vector<std::size_t> held_back_;   // finished before any answer
  // The result, built switch by switch as each one's queries settle.
  MetricsBuilder out_;
  int switches_answered_ = 0, ports_ok_ = 0, ports_failed_ = 0, ports_stale_ = 0;
  TimePoint started_;
};

}  // namespace ibfabric::fabric
