#pragma once
// What the `ports` and `sm` collectors share: a collect() that needs the local ports first,
// listed off the loop (mad::PortListing).

#include "collectors/collector.h"
#include "mad/engine.h"
#include "mad/port_listing.h"

#include <functional>
#include <vector>

namespace ibfabric {

// Without an engine, or when the listing fails, the run fails with the reason; otherwise `pass`
// gets the ports and the run's `done`, on the loop.
void collect_with_ports(mad::ClientHandle& mad, mad::PortListing& listing, Collector::Done done,
                        std::function<void(std::vector<mad::LocalPort>, Collector::Done)> pass);

}  // namespace ibfabric
