#include "collectors/probe/probe_stats.h"

#include <algorithm>
#include <cmath>

namespace ibfabric::probe {
namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

void observe(std::vector<std::uint64_t>& buckets, double value) {
  const auto& bounds = rtt_buckets();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (value <= bounds[i]) ++buckets[i];
  }
}

double nearest_rank(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

const std::vector<double>& rtt_buckets() {
  static const std::vector<double> bounds = {1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4,
                                             5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1};
  return bounds;
}

PeerStats::PeerStats(SpikeRule rule, std::size_t window)
    : rule_(rule),
      window_size_(std::max<std::size_t>(1, window)),
      buckets_(rtt_buckets().size(), 0),
      network_buckets_(rtt_buckets().size(), 0) {}

bool PeerStats::add(std::chrono::nanoseconds rtt, std::optional<std::chrono::nanoseconds> network) {
  const double value = seconds(rtt);
  ++received_;
  sum_ += value;
  observe(buckets_, value);
  if (network) {
    double n = std::max(0.0, seconds(*network));
    ++network_count_;
    network_sum_ += n;
    observe(network_buckets_, n);
    last_network_ = n;
  }
  if (last_) jitter_ += (std::abs(value - *last_) - jitter_) / 16.0;
  last_ = value;
  window_.push_back(value);
  if (window_.size() > window_size_) window_.pop_front();

  bool spike = false;
  auto above = [&](double v, double median) {
    return v > rule_.multiplier * median && v > seconds(rule_.floor);
  };
  if (baseline_.size() >= rule_.baseline_min) {
    double median = *baseline();
    spike = above(value, median);
    if (spike && network && !above(seconds(*network), median)) ++host_spikes_;
  }
  if (spike) {
    ++spikes_;
  } else {
    // Spikes stay out of the baseline, so a burst of them does not raise the bar for the next.
    baseline_.push_back(value);
    if (baseline_.size() > rule_.baseline_window) baseline_.pop_front();
  }
  return spike;
}

std::optional<double> PeerStats::percentile(double q) const {
  if (window_.empty()) return std::nullopt;
  return nearest_rank(std::vector<double>(window_.begin(), window_.end()), q);
}

std::optional<double> PeerStats::max() const {
  if (window_.empty()) return std::nullopt;
  return *std::max_element(window_.begin(), window_.end());
}

std::optional<double> PeerStats::baseline() const {
  if (baseline_.empty()) return std::nullopt;
  return nearest_rank(std::vector<double>(baseline_.begin(), baseline_.end()), 0.5);
}

}  // namespace ibfabric::probe
