#include "exporters/prometheus/render.h"

#include "ibfabric/version.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace ibfabric {

namespace {

// The text exposition format (version 0.0.4), written straight from the snapshots: families
// of one name from several snapshots are grouped under one HELP/TYPE without copying them, and
// numbers are written with std::to_chars (shortest form that reads back exactly).

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_number(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    out.append(buffer, ec == std::errc() ? end : buffer);
  }
}

void append_sample(std::string& out, const std::string& name, std::string_view suffix,
                   const prometheus::ClientMetric& metric, const char* extra_name,
                   double extra_value, double value) {
  out += name;
  out += suffix;
  if (!metric.label.empty() || extra_name) {
    out += '{';
    bool first = true;
    for (const auto& label : metric.label) {
      if (!first) out += ',';
      first = false;
      out += label.name;
      out += "=\"";
      append_escaped(out, label.value, true);
      out += '"';
    }
    if (extra_name) {
      if (!first) out += ',';
      out += extra_name;
      out += "=\"";
      append_number(out, extra_value);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  append_number(out, value);
  if (metric.timestamp_ms) {
    out += ' ';
    out += std::to_string(metric.timestamp_ms);
  }
  out += '\n';
}

const char* type_name(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return "untyped";
  }
}

void append_metric(std::string& out, const prometheus::MetricFamily& family,
                   const prometheus::ClientMetric& m) {
  const std::string& name = family.name;
  switch (family.type) {
    case prometheus::MetricType::Counter:
      append_sample(out, name, "", m, nullptr, 0, m.counter.value);
      break;
    case prometheus::MetricType::Gauge:
      append_sample(out, name, "", m, nullptr, 0, m.gauge.value);
      break;
    case prometheus::MetricType::Histogram: {
      bool has_inf = false;
      for (const auto& b : m.histogram.bucket) {
        has_inf = has_inf || std::isinf(b.upper_bound);
        append_sample(out, name, "_bucket", m, "le", b.upper_bound,
                      static_cast<double>(b.cumulative_count));
      }
      if (!has_inf) {
        append_sample(out, name, "_bucket", m, "le", std::numeric_limits<double>::infinity(),
                      static_cast<double>(m.histogram.sample_count));
      }
      append_sample(out, name, "_sum", m, nullptr, 0, m.histogram.sample_sum);
      append_sample(out, name, "_count", m, nullptr, 0,
                    static_cast<double>(m.histogram.sample_count));
      break;
    }
    case prometheus::MetricType::Summary:
      for (const auto& q : m.summary.quantile) {
        append_sample(out, name, "", m, "quantile", q.quantile, q.value);
      }
      append_sample(out, name, "_sum", m, nullptr, 0, m.summary.sample_sum);
      append_sample(out, name, "_count", m, nullptr, 0,
                    static_cast<double>(m.summary.sample_count));
      break;
    default:
      append_sample(out, name, "", m, nullptr, 0, m.untyped.value);
      break;
  }
}

void append_family(std::string& out, const std::vector<const prometheus::MetricFamily*>& group) {
  const auto& first = *group.front();
  out += "# HELP ";
  out += first.name;
  out += ' ';
  append_escaped(out, first.help, false);
  out += "\n# TYPE ";
  out += first.name;
  out += ' ';
  out += type_name(first.type);
  out += '\n';
  for (const auto* family : group) {
    if (family->type != first.type) continue;  // a clash: the first type wins
    for (const auto& metric : family->metric) append_metric(out, first, metric);
  }
}

}  // namespace

std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live) {
  MetricsBuilder self;
  for (const auto& fill : live) fill(self);
  const MetricFamilies live_families = std::move(self).take();

  // Families by name in first-seen order; a name seen again (the health families every
  // runner publishes) adds its samples under the first one's HELP and TYPE.
  struct Group {
    std::vector<const prometheus::MetricFamily*> families;
    const Snapshot* snapshot = nullptr;  // where a family of its own has its text cached
    std::size_t index = 0;
  };
  std::vector<Group> groups;
  std::unordered_map<std::string_view, std::size_t> by_name;
  auto add = [&](const MetricFamilies& families, const Snapshot* snapshot) {
    for (std::size_t i = 0; i < families.size(); ++i) {
      auto [it, inserted] = by_name.emplace(families[i].name, groups.size());
      if (inserted) groups.push_back(Group{{}, snapshot, i});
      groups[it->second].families.push_back(&families[i]);
    }
  };
  for (const auto& snapshot : snapshots) {
    if (snapshot) add(snapshot->families, snapshot.get());
  }
  add(live_families, nullptr);

  std::string out;
  out.reserve(64 * 1024);
  for (const auto& group : groups) {
    if (group.families.size() == 1 && group.snapshot) {
      // A family only one snapshot has: its text does not change until the snapshot does.
      auto& cache = group.snapshot->rendered;
      if (cache.size() != group.snapshot->families.size()) {
        cache.assign(group.snapshot->families.size(), std::string());
      }
      std::string& text = cache[group.index];
      if (text.empty()) append_family(text, group.families);
      out += text;
    } else {
      append_family(out, group.families);
    }
  }
  return out;
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
