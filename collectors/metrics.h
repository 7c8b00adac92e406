#pragma once
// The metric model every collector fills and the exporter renders: prometheus-cpp's own
// MetricFamily data model.

#include <prometheus/metric_family.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ibfabric {

using MetricFamilies = std::vector<prometheus::MetricFamily>;
using Labels = std::vector<std::pair<std::string, std::string>>;

// Builds a list of metric families; samples of one family stay together whatever the order
// they are added in. Adding a sample to an existing name with another type is a programming
// error and throws std::logic_error.
class MetricsBuilder {
 public:
  void gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  void counter(std::string_view name, std::string_view help, const Labels& labels, double value);
  // A labels-only metric: value 1. By convention its name ends in `_info`.
  void info(std::string_view name, std::string_view help, const Labels& labels);
  // `bucket_counts[i]` is the cumulative count of observations <= `bounds[i]`; the +Inf bucket
  // is `count`.
  void histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const std::vector<double>& bounds, const std::vector<std::uint64_t>& bucket_counts,
                 std::uint64_t count, double sum);

  // Declares a family without samples, so its HELP/TYPE appear even when nothing is measured.
  void declare(std::string_view name, std::string_view help, prometheus::MetricType type);

  MetricFamilies take() &&;
  bool empty() const { return families_.empty(); }

 private:
  prometheus::ClientMetric& add(std::string_view name, std::string_view help,
                                prometheus::MetricType type, const Labels& labels);
  prometheus::MetricFamily& family(std::string_view name, std::string_view help,
                                   prometheus::MetricType type);

  MetricFamilies families_;
  std::unordered_map<std::string, std::size_t> index_;
};

// Appends `more` to `into`, merging families of the same name (their samples are concatenated).
void merge_families(MetricFamilies& into, const MetricFamilies& more);

// A GUID as label values carry it: "0x" and 16 lower-case hex digits.
std::string hex_guid(std::uint64_t guid);

// An immutable result of one collection; shared read-only between the loop and scrapes.
struct Snapshot {
  MetricFamilies families;
  // The exposition text of families[i], written on the first scrape that needs it and reused
  // until the snapshot is replaced (the exporter's cache; only the loop thread renders).
  mutable std::vector<std::string> rendered;
};
using SnapshotPtr = std::shared_ptr<const Snapshot>;

}  // namespace ibfabric
