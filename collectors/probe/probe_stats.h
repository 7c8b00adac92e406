#pragma once
// Per-peer probe statistics: RTT histogram, windowed percentiles, RFC 3550 jitter, and the
// spike rule. Pure logic, no I/O: tested on fixed inputs (tests/unit/probe_stats_test.cpp).

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace ibfabric::probe {

struct SpikeRule {
  double multiplier = 5.0;                  // a spike is above multiplier x baseline median ...
  std::chrono::nanoseconds floor{1000000};  // ... and above this absolute floor (1 ms)
  std::size_t baseline_window = 128;        // RTTs the rolling baseline median is taken over
  std::size_t baseline_min = 16;            // no spike verdict before this many
};

// Histogram bucket upper bounds in seconds: 1 us to 100 ms, 1-2-5 steps.
const std::vector<double>& rtt_buckets();

class PeerStats {
 public:
  PeerStats(SpikeRule rule, std::size_t window);

  // One answered probe. `rtt` is the round trip; `network` the round trip minus the time the
  // responder says it held the probe (nullopt when it does not say, as the stock ibping).
  // Returns true when this probe is a spike.
  bool add(std::chrono::nanoseconds rtt, std::optional<std::chrono::nanoseconds> network);
  void add_lost() { ++lost_; }
  void add_sent() { ++sent_; }

  std::uint64_t sent() const { return sent_; }
  std::uint64_t received() const { return received_; }
  std::uint64_t lost() const { return lost_; }
  std::uint64_t spikes() const { return spikes_; }
  // Of spikes(), those the responder's hold time explains: the RTT minus the hold would not
  // have been a spike (a paused or busy remote host, not the network).
  std::uint64_t host_spikes() const { return host_spikes_; }
  std::optional<double> last_rtt() const { return last_; }              // seconds
  std::optional<double> last_network() const { return last_network_; }  // seconds
  // RFC 3550 interarrival jitter applied to consecutive RTTs: J += (|D| - J) / 16, seconds.
  double jitter() const { return jitter_; }
  // Over the last `window` RTTs (nearest-rank); nullopt when there are none.
  std::optional<double> percentile(double q) const;
  std::optional<double> max() const;
  std::optional<double> baseline() const;  // median of the baseline window, seconds

  // Cumulative counts per rtt_buckets() bound, the count and sum (for the histogram).
  const std::vector<std::uint64_t>& bucket_counts() const { return buckets_; }
  const std::vector<std::uint64_t>& network_bucket_counts() const { return network_buckets_; }
  std::uint64_t network_count() const { return network_count_; }
  double sum() const { return sum_; }
  double network_sum() const { return network_sum_; }

 private:
  SpikeRule rule_;
  std::size_t window_size_;
  std::deque<double> window_;    // latest RTTs, seconds
  std::deque<double> baseline_;  // latest non-spike RTTs, seconds
  std::vector<std::uint64_t> buckets_, network_buckets_;
  std::uint64_t sent_ = 0, received_ = 0, lost_ = 0, spikes_ = 0, host_spikes_ = 0,
                network_count_ = 0;
  double sum_ = 0, network_sum_ = 0, jitter_ = 0;
  std::optional<double> last_, last_network_;
};

}  // namespace ibfabric::probe
