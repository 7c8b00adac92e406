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
        const kubelet::Options kubelet = kubelet::read_options(section);
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
        return std::make_unique<SriovCollector>(SriovConfig{context.sysfs_root, kubelet},
                                                std::move(dump));
      }};
}

}  // namespace ibfabric::sriov
