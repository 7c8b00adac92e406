#include "exporters/prometheus/self_metrics.h"

#include "ibfabric/version.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace ibfabric {

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

// /proc/stat is long and btime never changes: read it once.
double boot_time_seconds() {
  static const double boot_time = [] {
    std::ifstream in("/proc/stat");
    for (std::string key; in >> key;) {
      if (key == "btime") {
        double value = 0;
        in >> value;
        return value;
      }
      in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return 0.0;
  }();
  return boot_time;
}

// Since Linux 6.2 the size of /proc/self/fd is the number of open descriptors: one stat()
// instead of listing the directory, which makes the kernel build an entry per descriptor and
// was most of what serving a scrape cost. Older kernels say 0 there: list it.
double open_fds() {
  struct stat st {};
  if (::stat("/proc/self/fd", &st) == 0 && st.st_size > 0) return static_cast<double>(st.st_size);
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  // The iterator itself holds one descriptor while counting.
  return fds > 0 ? fds - 1 : 0;
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
  out.gauge("process_open_fds", "Number of open file descriptors.", {}, open_fds());
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
