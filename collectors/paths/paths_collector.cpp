#include "collectors/paths/paths_collector.h"

namespace ibfabric::paths {

void PathsCollector::collect(Done done) {
  if (!mad_.engine()) {
    done(CollectResult{{}, false, "no MAD engine"});
    return;
  }
  std::make_shared<PathsRun>(mad_, config_, state_, *peers_, *names_, std::move(done))->start();
}

CollectorSpec spec() {
  return CollectorSpec{
      "paths", false, std::chrono::seconds(30),
      [](CollectorContext& context, ConfigSection& section) -> std::unique_ptr<Collector> {
        PathsConfig c;
        c.refresh = section.get_duration("refresh", c.refresh, std::chrono::seconds(1));
        c.verify_every = section.get_duration("verify_every", c.verify_every);
        c.max_mads_per_run =
            static_cast<int>(section.get_int("max_mads_per_run", c.max_mads_per_run, 10, 1000000));
        c.max_hops = static_cast<int>(section.get_int("max_hops", c.max_hops, 1, 63));
        section.finish();
        return std::make_unique<PathsCollector>(context, c);
      }};
}

}  // namespace ibfabric::paths
