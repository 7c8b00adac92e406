#include "kubelet/kubelet_watch.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace ibfabric::kubelet {

Options read_options(ConfigSection& section) {
  Options options;
  options.socket =
      section.get_string("kubelet_socket", "/var/lib/kubelet/pod-resources/kubelet.sock");
  if (!options.socket.empty() && options.socket.front() != '/') {
    section.fail("kubelet_socket",
                 "an absolute path to the kubelet's pod-resources socket, or \"\" to turn "
                 "the pod lookup off");
  }
  // The interval is the runner's key; read here only to fit the deadline in it.
  std::chrono::nanoseconds interval = std::chrono::seconds(15);
  if (const YAML::Node node = section.node()["interval"]; node && node.IsScalar()) {
    if (const auto parsed = parse_duration(node.Scalar())) interval = *parsed;
  }
  const bool timeout_given = section.has("kubelet_timeout");
  const auto timeout = section.get_duration(
      "kubelet_timeout", std::min<std::chrono::nanoseconds>(std::chrono::seconds(2), interval / 2),
      std::chrono::milliseconds(1));
  if (timeout_given && (timeout > std::chrono::seconds(10) || timeout >= interval)) {
    section.fail("kubelet_timeout", "at most 10s and shorter than the interval (" +
                                        format_duration(interval) +
                                        "): the List call is part of every collection");
  }
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return options;
}

Answer Watch::ask(const Options& options) {
  Answer answer;
  if (options.socket.empty()) return answer;
  // Checked on every run, so that the pod series start when a kubelet does (a node joining a
  // cluster, a kubelet restart re-creating its socket). A node without Kubernetes has no
  // socket: nothing to say, nothing to log.
  struct stat status {};
  if (::stat(options.socket.c_str(), &status) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
    if (socket_seen_) {
      spdlog::info("{}: kubelet pod-resources socket is gone socket={}", prefix_, options.socket);
    }
    socket_seen_ = false;
    last_reason_.clear();
    return answer;
  }
  answer.socket_exists = true;
  if (!socket_seen_) {
    spdlog::info("{}: kubelet pod-resources socket found socket={}", prefix_, options.socket);
    socket_seen_ = true;
  }

  std::string reason;  // "" on success
  std::string what;
  try {
    answer.devices = list_pod_devices(options.socket, options.timeout);
  } catch (const KubeletError& e) {
    reason = e.reason();
    what = e.what();
  } catch (const std::exception& e) {
    reason = "other";
    what = e.what();
  }
  answer.up = reason.empty();
  if (!answer.up) ++errors_[reason];
  // A change is a change of reason: the details of one failure (which errno a dropped
  // connection gave) vary from run to run and are not worth a line each.
  if (reason != last_reason_) {
    if (!answer.up) {
      spdlog::warn("{}: kubelet pod-resources List failed socket={} reason={} error=\"{}\"",
                   prefix_, options.socket, reason, what);
    } else {
      spdlog::info("{}: kubelet pod-resources List works again socket={}", prefix_, options.socket);
    }
    last_reason_ = reason;
  }
  return answer;
}

std::map<std::string, std::uint64_t> Watch::errors() const {
  std::map<std::string, std::uint64_t> all;
  for (const char* reason : kKubeletErrorReasons) {
    const auto found = errors_.find(reason);
    all[reason] = found == errors_.end() ? 0 : found->second;
  }
  return all;
}

}  // namespace ibfabric::kubelet
