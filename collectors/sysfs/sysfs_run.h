#pragma once
// One collection of the `sysfs` collector (SysfsRun) and what it keeps from collection to
// collection (SysfsState, owned by the SysfsCollector): the collector builds a SysfsRun per
// collection on its worker thread; the run reads the tree, builds the metrics and keeps the
// error bookkeeping in the state. Metrics: docs/collectors.md, "Collector `sysfs`".

#include "collectors/collector.h"
#include "collectors/sysfs/attribute_reader.h"
#include "collectors/sysfs/counter_files.h"
#include "core/metrics.h"
#include "ib/sysfs_parse.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace ibfabric::sysfs {

struct SysfsConfig;

// What lives across collections: the error counters and the files logged as bad, and the
// attribute reader's open descriptors.
struct SysfsState {
  // Failed reads per (device, port; "" for device files) since start: exported as a counter.
  std::map<std::pair<std::string, std::string>, std::uint64_t> read_errors;
  // Files that are bad right now: each is logged when it turns bad, and again when it
  // recovers, not on every poll.
  std::set<std::string> bad_files;
  std::set<std::string> missing_devices_logged;
  AttributeReader reader{default_max_open_attributes()};
};

class SysfsRun {
 public:
  SysfsRun(const SysfsConfig& config, SysfsState& state);
  // Reads everything now. A read that blocks blocks the whole run: every device and port
  // waits with it.
  CollectResult run();

 private:
  enum class CounterDir { legacy, pma, port_hw, device_hw };

  CollectResult failure(std::string message);
  void good(const std::string& path);
  void bad(const std::string& path, const std::string& device, const std::string& port,
           const std::string& what);
  std::optional<std::string> text(const std::string& path, const std::string& device,
                                  const std::string& port, bool optional = false);
  template <typename Parser>
  auto parsed(const std::string& path, const std::string& device, const std::string& port,
              Parser parse, std::string_view expected) -> decltype(parse(std::string_view{}));
  std::optional<std::string> plain(const std::string& path, const std::string& device,
                                   const std::string& port);

  void collect_device(const std::string& device, const std::string& dir);
  Driver driver_of(const std::string& dir, const std::string& device);
  static std::string pci_address(const std::string& dir);
  void collect_port(const std::string& device, const std::string& port, const std::string& dir,
                    Driver driver);
  static std::optional<double> effective_rate(const LinkRate& rate, const std::string& layer);
  void counter_dir(const std::string& dir, const std::string& device, const std::string& port,
                   CounterDir kind, Driver driver = Driver::other);
  void emit_errors(const std::string& device, const std::string& port);

  const SysfsConfig& config_;
  SysfsState& s_;
  MetricsBuilder out_;
  // Per port: named metrics already emitted, and counters/ files replaced by counters_ext/.
  std::set<std::string_view> emitted_;
  std::set<std::string, std::less<>> superseded_;
};

}  // namespace ibfabric::sysfs
