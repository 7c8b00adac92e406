#include "collectors/ports/ports_collector.h"

namespace ibfabric::ports {

PortsCollector::PortsCollector(boost::asio::io_context& io,
                               std::function<std::shared_ptr<mad::Engine>()> mad_engine,
                               PortsConfig config, std::shared_ptr<const NodeNameMap> names,
                               mad::PortListing::Lister lister,
                               std::chrono::nanoseconds listing_deadline,
                               std::string state_directory)
    : mad_(std::move(mad_engine)),
      config_(std::move(config)),
      listing_(io,
               lister
                   ? std::move(lister)
                   : mad::PortListing::infiniband({config_.devices.begin(), config_.devices.end()}),
               listing_deadline),
      names_(std::move(names)),
      state_(io, std::move(state_directory)) {}

void PortsCollector::collect(Done done) {
  if (!state_loaded_) {
    state_loaded_ = true;
    state_.pending_state = state_.store.load();
  }
  collect_with_ports(mad_, listing_, std::move(done),
                     [this](std::vector<mad::LocalPort> ports, Done done) {
                       std::make_shared<PortsRun>(mad_, config_, *names_, state_, std::move(done),
                                                  std::move(ports))
                           ->start();
                     });
}

CollectorSpec spec() {
  return CollectorSpec{
      "ports", true, std::chrono::seconds(15),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        PortsConfig c;
        c.devices = section.get_string_list("devices");
        c.peers = section.get_bool("peers", c.peers);
        c.error_details = section.get_bool("error_details", c.error_details);
        c.link_memory = section.get_duration("link_memory", c.link_memory);
        c.keep_unread =
            section.get_duration("keep_unread", c.keep_unread, std::chrono::nanoseconds{0});
        section.finish();
        c.transmit_wait_ticks = *context.transmit_wait_ticks;
        return std::make_unique<PortsCollector>(context.io, context.mad_engine, std::move(c),
                                                context.node_names, mad::PortListing::Lister{},
                                                mad::PortListing::kDefaultDeadline,
                                                context.state_directory);
      }};
}

}  // namespace ibfabric::ports
