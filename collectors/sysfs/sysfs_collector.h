#pragma once
// The `sysfs` collector: every local HCA and port under <sysfs_root>/class/infiniband — identity,
// state, rate, and every counter in counters/ and hw_counters/. Reads are synchronous and can
// block (a counters/ read asks the HCA's PMA through its firmware), so it is a
// BlockingCollector: it runs on a worker thread, bounded by its run_timeout.
// Metrics are documented in docs/collectors.md, "Collector `sysfs`".

#include "collectors/collector.h"
#include "collectors/sysfs/sysfs_run.h"

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::sysfs {

// What the `sysfs` collector reads, from its keys (spec() reads them with their defaults;
// docs/configuration.md, "Collector `sysfs`", and tests/unit/config_keys_test.cpp ties the two).
// A device is read when it passes `devices`, `devices_include` and `devices_exclude` (exclude
// wins).
struct SysfsConfig {
  std::string sysfs_root;         // --sysfs-root: /sys, or a fixture tree in tests
  std::set<std::string> devices;  // empty: every device
  std::optional<std::regex> devices_include, devices_exclude;  // absent: everything

  std::string class_dir() const { return sysfs_root + "/class/infiniband"; }
  bool selects(const std::string& device) const;
};

// name "sysfs", enabled by default, every 15s.
CollectorSpec spec();

class SysfsCollector final : public BlockingCollector {
 public:
  explicit SysfsCollector(SysfsConfig config);

  // One SysfsRun, on the collector's worker thread (sysfs_run.h).
  CollectResult collect_blocking() override;

 private:
  SysfsConfig config_;
  SysfsState state_;
};

}  // namespace ibfabric::sysfs
