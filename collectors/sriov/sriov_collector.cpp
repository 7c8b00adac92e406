#include "collectors/sriov/sriov_collector.h"

#include "collectors/sriov/sriov_netlink.h"
#include "collectors/sriov/sriov_run.h"

#include <cstdlib>

namespace ibfabric::sriov {

SriovCollector::SriovCollector(SriovConfig config, NetlinkDump dump)
    : config_(std::move(config)), dump_(std::move(dump)) {}

CollectResult SriovCollector::collect_blocking() {
  try {
    return SriovRun(config_, dump_, state_).run();
  } catch (const std::exception& e) {
    // Only allocation failure or a programming error gets here.
    return CollectResult{MetricFamilies{}, false, std::string("sriov: ") + e.what()};
  }
}

CollectorSpec spec() {
  return CollectorSpec{
      "sriov", true, std::chrono::seconds(15),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        const bool netlink = section.get_bool("netlink", true);
        const auto timeout = section.get_duration("netlink_timeout", std::chrono::seconds(1),
                                                  std::chrono::milliseconds(1));
        if (timeout > std::chrono::seconds(10)) {
          // The dump runs on the collector's worker thread; a longer wait only keeps it busy.
          section.fail("netlink_timeout", "at most 10s");
        }
        KubeletOptions kubelet;
        kubelet.socket =
            section.get_string("kubelet_socket", "/var/lib/kubelet/pod-resources/kubelet.sock");
        if (!kubelet.socket.empty() && kubelet.socket.front() != '/') {
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
        const auto kubelet_timeout = section.get_duration(
            "kubelet_timeout",
            std::min<std::chrono::nanoseconds>(std::chrono::seconds(2), interval / 2),
            std::chrono::milliseconds(1));
        if (timeout_given &&
            (kubelet_timeout > std::chrono::seconds(10) || kubelet_timeout >= interval)) {
          section.fail("kubelet_timeout", "at most 10s and shorter than the interval (" +
                                              format_duration(interval) +
                                              "): the List call is part of every collection");
        }
        kubelet.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kubelet_timeout);
        section.finish();
        NetlinkDump dump;
        if (netlink) {
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
          // Tests' seam at the socket: a unix socket playing the kernel (docs/testing.md).
          const char* stand_in = std::getenv("IBFABRIC_SRIOV_NETLINK_SOCKET");
          dump = [ms, path = std::string(stand_in ? stand_in : "")] {
            return dump_links_with_vfs(ms, path);
          };
        }
        return std::make_unique<SriovCollector>(SriovConfig{context.sysfs_root, std::move(kubelet)},
                                                std::move(dump));
      }};
}

}  // namespace ibfabric::sriov
