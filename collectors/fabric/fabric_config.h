#pragma once
// The `fabric` collector's configuration: the `collectors.fabric` keys (docs/configuration.md),
// parsed with their ranges by spec() in fabric_collector.cpp.

#include "collectors/fabric/fabric_model.h"
#include "config/config.h"

#include <chrono>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::fabric {

struct FabricConfig {
  int shard = 0;              // this node sweeps switches whose stable_guid_hash % shards == shard
  int shards = 1;             // 1 = no sharding
  int rediscover_every = 10;  // sweeps between discoveries (1 = discover before every sweep)
  int max_hops = kMaxHops;
  // The series budget: which per-port counters are exported (metric names without the
  // ibfabric_fabric_port_ prefix and _total suffix). Empty = every counter.
  std::set<std::string> counters;
  // PortRcvErrorDetails and PortXmitDiscardDetails of every switch port: 2 more MADs a port.
  bool error_details = false;
  // PortVLXmitWaitCounters of every switch port: 1 more MAD a port, a series per operational
  // data VL.
  bool vl_transmit_wait = false;
  std::chrono::nanoseconds link_memory = std::chrono::hours(24);
  // How long a switch port that cannot be read (its queries lost) keeps the values it was last
  // read with, and a switch a discovery missed stays in the topology. 0: not at all.
  std::chrono::nanoseconds keep_unread = std::chrono::minutes(10);
  // The configuration's PortXmitWait ticks (top-level transmit_wait_ticks), for the switches
  // ib/transmit_wait_tick.h does not know.
  std::vector<TransmitWaitTickRule> transmit_wait_ticks;
  // Not a key of the configuration: once a sweep's result holds this many samples, its large
  // families are compressed so far on a thread of their own while the sweep goes on (docs/
  // design.md, "Memory of the fabric sweep"). 2 MiB of samples; tests set less.
  std::size_t seal_samples = 131072;
};

}  // namespace ibfabric::fabric
