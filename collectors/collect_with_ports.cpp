#include "collectors/collect_with_ports.h"

namespace ibfabric {

void collect_with_ports(mad::ClientHandle& mad, mad::PortListing& listing, Collector::Done done,
                        std::function<void(std::vector<mad::LocalPort>, Collector::Done)> pass) {
  if (!mad.engine()) {
    done(CollectResult{{}, false, "no MAD engine"});
    return;
  }
  // Listed off the loop: libibumad's sysfs reads can block on the HCA.
  listing.list([done = std::move(done), pass = std::move(pass)](
                   std::optional<std::vector<mad::LocalPort>> ports, std::string error) mutable {
    if (!ports) {
      done(CollectResult{{}, false, std::move(error)});
      return;
    }
    pass(std::move(*ports), std::move(done));
  });
}

}  // namespace ibfabric
