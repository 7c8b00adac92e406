#include "collectors/sm/sm_collector.h"

namespace ibfabric::sm {

SmCollector::SmCollector(boost::asio::io_context& io,
                         std::function<std::shared_ptr<mad::Engine>()> mad_engine, SmConfig config,
                         std::shared_ptr<const NodeNameMap> names, mad::PortListing::Lister lister,
                         std::chrono::nanoseconds listing_deadline)
    : mad_(std::move(mad_engine)),
      config_(std::move(config)),
      names_(std::move(names)),
      listing_(io,
               lister
                   ? std::move(lister)
                   : mad::PortListing::infiniband({config_.devices.begin(), config_.devices.end()}),
               listing_deadline) {}

void SmCollector::collect(Done done) {
  collect_with_ports(
      mad_, listing_, std::move(done), [this](std::vector<mad::LocalPort> ports, Done done) {
        std::make_shared<SmRun>(mad_, config_, *names_, state_, std::move(done), std::move(ports))
            ->start();
      });
}

CollectorSpec spec() {
  return CollectorSpec{
      "sm", true, std::chrono::seconds(15),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        SmConfig c;
        c.devices = section.get_string_list("devices");
        c.subnet = section.get_bool("subnet", c.subnet);
        section.finish();
        return std::make_unique<SmCollector>(context.io, context.mad_engine, std::move(c),
                                             context.node_names);
      }};
}

}  // namespace ibfabric::sm
