#pragma once
// The `sysfs` collector: every local HCA and port under <sysfs_root>/class/infiniband — identity,
// state, rate, and every counter in counters/ and hw_counters/. Reads are synchronous and can
// block (a counters/ read asks the HCA's PMA through its firmware), so it is a
// BlockingCollector: it runs on a worker thread, bounded by its run_timeout.
// Metrics are documented in docs/collectors.md, "Collector `sysfs`".

#include "collectors/collector.h"
#include "collectors/sysfs/attribute_reader.h"

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::sysfs {

// name "sysfs", enabled by default, every 15s. Its keys are read in spec() and documented in
// docs/configuration.md, "Collector `sysfs`" (tests/unit/config_keys_test.cpp ties the two).
// A device is read when it passes `devices`, `devices_include` and `devices_exclude` (exclude
// wins).
CollectorSpec spec();

class SysfsCollector final : public BlockingCollector {
 public:
  // `devices` empty means every device; an absent regex selects everything.
  SysfsCollector(std::string sysfs_root, std::vector<std::string> devices,
                 std::optional<std::regex> include = std::nullopt,
                 std::optional<std::regex> exclude = std::nullopt);

  // Reads everything now. A read that blocks blocks the whole run: every device and port of
  // this collector waits with it.
  CollectResult collect_blocking() override;

 private:
  friend class CollectionPass;
  using ErrorKey = std::pair<std::string, std::string>;  // device, port ("" for device files)

  bool selects(const std::string& device) const;

  std::string class_dir_;
  std::set<std::string> only_devices_;
  std::optional<std::regex> include_;
  std::optional<std::regex> exclude_;
  // Failed reads per device/port since start: exported as a counter.
  std::map<ErrorKey, std::uint64_t> read_errors_;
  // Files that are bad right now: each is logged when it turns bad, and again when it recovers,
  // not on every poll.
  std::set<std::string> bad_files_;
  std::set<std::string> missing_devices_logged_;
  AttributeReader reader_;
};

}  // namespace ibfabric::sysfs
