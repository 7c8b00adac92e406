#include "exporters/prometheus/render.h"

#include "ibfabric/version.h"

#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ibfabric {

std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live) {
  MetricFamilies families;
  for (const auto& snapshot : snapshots) {
    if (snapshot) merge_families(families, snapshot->families);
  }
  MetricsBuilder self;
  for (const auto& fill : live) fill(self);
  merge_families(families, std::move(self).take());
  return prometheus::TextSerializer().Serialize(families);
}

namespace {

// /proc/self/stat fields after the command name, which may itself hold spaces and ')'.
std::vector<std::string> proc_self_stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> fields;
  auto close = line.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;  // fields[0] is "state" (field 3 of proc(5))
}

double boot_time_seconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double value = 0;
      in >> value;
      return value;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace

void add_process_metrics(MetricsBuilder& out) {
  const auto fields = proc_self_stat_fields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5) numbering: utime 14, stime 15, starttime 22, vsize 23, rss 24; fields[0] is 3.
  auto field = [&](int number) {
    return std::stod(fields.at(static_cast<std::size_t>(number - 3)));
  };
  if (fields.size() >= 22) {
    out.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", {},
                (field(14) + field(15)) / ticks);
    out.gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.", {},
              boot_time_seconds() + field(22) / ticks);
    out.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {}, field(23));
    out.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
              field(24) * page);
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  // The iterator itself holds one descriptor while counting.
  out.gauge("process_open_fds", "Number of open file descriptors.", {}, fds > 0 ? fds - 1 : 0);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.gauge("process_max_fds", "Maximum number of open file descriptors.", {},
              static_cast<double>(limit.rlim_cur));
  }
}

void add_build_info(MetricsBuilder& out) {
  out.info("ibfabric_build_info",
           "A metric with a constant value of 1 labelled by the build of ibfabricd.",
           {{"version", kVersion}, {"build_type", kBuildType}, {"compiler", kCompiler}});
}

}  // namespace ibfabric
