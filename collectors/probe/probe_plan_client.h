#pragma once
// The probe plan's client (collectors.probe.plan_url): the peers ibfabric-localize gives this
// node to probe first, those of the training jobs it runs (docs/design.md, "Probes that cover
// every job"). One GET of <plan_url>?node_guid=0x<this node's GUID> on the daemon's io_context,
// http or https (the system's CA store, the host name checked), with a deadline; the answer is
// one planned peer a line, its node GUID first ("0x0002c90300c00003 gpu-node-03"), lines
// starting with '#' being comments.

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::probe {

// The node GUIDs of a plan's body; nullopt when a line is neither a comment nor a GUID.
std::optional<std::vector<std::uint64_t>> parse_plan(std::string_view body);

// Throws std::invalid_argument, saying why, for a URL the client cannot use.
void check_plan_url(const std::string& url);

class PlanClient {
 public:
  // Throws std::invalid_argument for a URL it cannot use (check_plan_url).
  PlanClient(boost::asio::io_context& io, std::string url);
  ~PlanClient();
  // `done` runs on the io_context once: the planned peers, or nullopt and what failed.
  using Done = std::function<void(std::optional<std::vector<std::uint64_t>>, std::string)>;
  void fetch(std::uint64_t node_guid, std::chrono::nanoseconds timeout, Done done);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ibfabric::probe
