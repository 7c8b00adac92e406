#pragma once
// Helpers shared by the collector unit tests: run a collector once, look samples up by name and
// labels, capture log lines, and a scratch directory.

#include "collectors/collector.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ibfabric::test_support {

namespace fs = std::filesystem;

inline CollectResult collect(Collector& collector) {
  std::optional<CollectResult> result;
  collector.collect([&](CollectResult r) { result = std::move(r); });
  EXPECT_TRUE(result) << "collect() returned without calling done";
  return result ? std::move(*result) : CollectResult{};
}

// One collection of a collector that runs on `io`, run until the loop has nothing left to do
// (a port listing's thread, then a fake engine's answers).
inline CollectResult collect_on(boost::asio::io_context& io, Collector& collector) {
  std::optional<CollectResult> result;
  collector.collect([&](CollectResult r) { result = std::move(r); });
  io.restart();
  io.run();
  EXPECT_TRUE(result) << "the run never ended";
  return result ? std::move(*result) : CollectResult{};
}

// The same, for a collection that must succeed: its metrics.
inline MetricFamilies metrics_on(boost::asio::io_context& io, Collector& collector) {
  auto r = collect_on(io, collector);
  EXPECT_TRUE(r.success) << r.error;
  return std::move(r.metrics);
}

// Port 1 of CA mlx5_0, InfiniBand, of node `node_guid` (its port GUID the next one).
inline mad::LocalPort ib_port(std::uint64_t node_guid) {
  mad::LocalPort port;
  port.ca = "mlx5_0";
  port.port = 1;
  port.node_guid = node_guid;
  port.port_guid = node_guid + 1;
  port.link_layer = "InfiniBand";
  return port;
}

inline std::map<std::string, std::string> label_map(const Sample& sample) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : sample.labels->labels()) out[name] = value;
  return out;
}

inline bool has_labels(const Sample& sample, const Labels& labels) {
  const auto have = sample.labels->labels();
  for (const auto& [name, value] : labels) {
    bool found = false;
    for (const auto& [n, v] : have) {
      if (n == name) found = v == value;
    }
    if (!found) return false;
  }
  return true;
}

inline const MetricFamily* family(const MetricFamilies& families, const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The samples of `name` carrying all of `labels`.
inline std::vector<const Sample*> samples(const MetricFamilies& families, const std::string& name,
                                          const Labels& labels = {}) {
  std::vector<const Sample*> out;
  if (const auto* f = family(families, name)) {
    for (const auto& sample : f->samples) {
      if (has_labels(sample, labels)) out.push_back(&sample);
    }
  }
  return out;
}

// The value of the one sample of `name` with `labels`; nullopt when there is none.
inline std::optional<double> value(const MetricFamilies& families, const std::string& name,
                                   const Labels& labels) {
  auto found = samples(families, name, labels);
  if (found.empty()) return std::nullopt;
  EXPECT_EQ(found.size(), 1u) << name << " has several samples with these labels";
  return found[0]->value;
}

inline std::map<std::string, std::string> info(const MetricFamilies& families,
                                               const std::string& name, const Labels& labels) {
  auto found = samples(families, name, labels);
  EXPECT_EQ(found.size(), 1u) << name;
  if (found.size() != 1) return {};
  EXPECT_EQ(found[0]->value, 1);
  return label_map(*found[0]);
}

// Captures what the collector logs, to check each bad file is logged once.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::trace);
    logger->set_pattern("%l %v");
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // Lines logged since the last call.
  std::vector<std::string> take() {
    std::vector<std::string> lines;
    std::string line;
    std::istringstream in(stream_.str());
    while (std::getline(in, line)) lines.push_back(line);
    stream_.str("");
    return lines;
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

inline std::size_t count_containing(const std::vector<std::string>& lines,
                                    const std::string& text) {
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/ibfabric-sysfs-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ibfabric::test_support
