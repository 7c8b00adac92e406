#pragma once
// Probes that cover every job (docs/design.md, "Probes that cover every job"): under sparse
// probing (`max_peers`, `rotate_every`) the nodes of one training job may never probe each other,
// and a job's own paths carry no evidence. The plan gives each host of a multi-node job the next
// of the job's hosts, in the order of their GUIDs, as a peer to probe first: every job's hosts
// form a ring of probed pairs, a host of one job adds one peer, and two localizers (HA) give the
// same plan. Pure code: the jobs in, the plan out.

#include <cstdint>
#include <map>
#include <vector>

namespace ibfabric::localize {

// `jobs`: the node GUIDs of each job's hosts (any order, duplicates ignored). Returns each host's
// planned peers, a peer once however many jobs share the pair, in the order of the jobs given.
std::map<std::uint64_t, std::vector<std::uint64_t>> probe_plan(
    const std::vector<std::vector<std::uint64_t>>& jobs);

}  // namespace ibfabric::localize
