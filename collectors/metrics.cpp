#include "collectors/metrics.h"

#include <cstdio>
#include <limits>
#include <stdexcept>

namespace ibfabric {

prometheus::MetricFamily& MetricsBuilder::family(std::string_view name, std::string_view help,
                                                 prometheus::MetricType type) {
  auto [it, inserted] = index_.try_emplace(std::string(name), families_.size());
  if (inserted) {
    families_.push_back(prometheus::MetricFamily{std::string(name), std::string(help), type, {}});
  }
  auto& fam = families_[it->second];
  if (fam.type != type) {
    throw std::logic_error("metric " + std::string(name) + " added with two different types");
  }
  return fam;
}

prometheus::ClientMetric& MetricsBuilder::add(std::string_view name, std::string_view help,
                                              prometheus::MetricType type, const Labels& labels) {
  auto& fam = family(name, help, type);
  auto& metric = fam.metric.emplace_back();
  metric.label.reserve(labels.size());
  for (const auto& [k, v] : labels) metric.label.push_back({k, v});
  return metric;
}

void MetricsBuilder::gauge(std::string_view name, std::string_view help, const Labels& labels,
                           double value) {
  add(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void MetricsBuilder::counter(std::string_view name, std::string_view help, const Labels& labels,
                             double value) {
  add(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void MetricsBuilder::info(std::string_view name, std::string_view help, const Labels& labels) {
  gauge(name, help, labels, 1);
}

void MetricsBuilder::histogram(std::string_view name, std::string_view help, const Labels& labels,
                               const std::vector<double>& bounds,
                               const std::vector<std::uint64_t>& bucket_counts, std::uint64_t count,
                               double sum) {
  if (bounds.size() != bucket_counts.size()) {
    throw std::logic_error("histogram " + std::string(name) + ": bounds and counts differ");
  }
  auto& h = add(name, help, prometheus::MetricType::Histogram, labels).histogram;
  h.sample_count = count;
  h.sample_sum = sum;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    h.bucket.push_back({bucket_counts[i], bounds[i]});
  }
  h.bucket.push_back({count, std::numeric_limits<double>::infinity()});
}

void MetricsBuilder::declare(std::string_view name, std::string_view help,
                             prometheus::MetricType type) {
  family(name, help, type);
}

MetricFamilies MetricsBuilder::take() && { return std::move(families_); }

void merge_families(MetricFamilies& into, const MetricFamilies& more) {
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < into.size(); ++i) index.emplace(into[i].name, i);
  for (const auto& fam : more) {
    auto it = index.find(fam.name);
    if (it == index.end()) {
      into.push_back(fam);
      index.emplace(into.back().name, into.size() - 1);
    } else {
      auto& dst = into[it->second].metric;
      dst.insert(dst.end(), fam.metric.begin(), fam.metric.end());
    }
  }
}

std::string hex_guid(std::uint64_t guid) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(guid));
  return text;
}

}  // namespace ibfabric
