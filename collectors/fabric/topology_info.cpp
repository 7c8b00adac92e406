#include "collectors/fabric/topology_info.h"

#include "core/text_format.h"
#include "mad/attributes.h"

#include <infiniband/mad.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric::fabric {
namespace {

// Calls `flush(builder)` whenever the builder holds `part_samples` samples, and once at the
// end; each sample goes to the builder in the order the exposition shows it.
template <class Flush>
void make_info(const TopologyInfo& info, std::size_t part_samples, Flush flush) {
  MetricsBuilder out;
  std::size_t samples = 0;
  auto added = [&] {
    if (++samples < part_samples) return;
    flush(out);
    out = MetricsBuilder();
    samples = 0;
  };
  for (const auto& [guid, node] : info.topology->nodes()) {
    if (!in_shard(guid, info.shard, info.shards)) continue;
    out.info("ibfabric_fabric_node_info",
             "A node of the fabric (NodeInfo, NodeDescription) and its name (node-name-map, "
             "else NodeDescription, else GUID); each node is reported by the shard its GUID "
             "hashes to.",
             {{"node_guid", hex_guid(guid)},
              {"node_type", mad::node_type_name(node.type)},
              {"node_description", trim_node_description(node.description)},
              {"node_name", info.names->name(guid, node.description)}});
    added();
  }
  for (const auto& link : info.links.links()) {
    if (!in_shard(link.guid, info.shard, info.shards)) continue;
    // A cable between two switches is seen from both ends; "a" marks one end of each cable
    // (the lower GUID and port), so a per-cable view counts it once, whichever shard sweeps it.
    bool b_end = link.remote_type == IB_NODE_SWITCH &&
                 std::pair<std::uint64_t, int>(link.remote_guid, link.remote_port) < link.end();
    out.info("ibfabric_fabric_link_info",
             "What port `port` of switch `node_guid` is cabled to, by GUID and by name, as "
             "discovery last saw it (kept for link_memory after the far end stops answering).",
             {{"cable_end", b_end ? "b" : "a"},
              {"node_guid", hex_guid(link.guid)},
              {"port", std::to_string(link.port)},
              {"node_name", info.links.name(link.guid)},
              {"remote_node_guid", hex_guid(link.remote_guid)},
              {"remote_port", std::to_string(link.remote_port)},
              {"remote_node_type", mad::node_type_name(link.remote_type)},
              {"remote_node_name", info.links.name(link.remote_guid)}});
    added();
  }
  if (samples > 0) flush(out);
}

}  // namespace

MetricFamilies topology_info_samples(const TopologyInfo& info) {
  MetricFamilies out;
  make_info(info, static_cast<std::size_t>(-1),
            [&](MetricsBuilder& b) { out = std::move(b).take(); });
  return out;
}

MetricFamilies topology_info_compressed(const TopologyInfo& info, std::size_t part_samples) {
  std::vector<std::pair<MetricFamily, DeflatedText>> families;  // in the order first seen
  Deflater deflater;
  std::string text;
  make_info(info, part_samples, [&](MetricsBuilder& b) {
    for (auto& family : std::move(b).take()) {
      auto it = std::find_if(families.begin(), families.end(),
                             [&](const auto& f) { return f.first.name == family.name; });
      bool first = it == families.end();
      auto piece = deflate_family(family, deflater, text, first);
      if (first) {
        MetricFamily meta;
        meta.name = family.name;
        meta.help = family.help;
        meta.type = family.type;
        families.emplace_back(std::move(meta), DeflatedText{});
        it = std::prev(families.end());
      }
      append_deflated(it->second, *piece);
    }
  });
  MetricFamilies out;
  for (auto& [family, deflated] : families) {
    deflated.deflated.shrink_to_fit();
    family.text = std::make_shared<const DeflatedText>(std::move(deflated));
    out.push_back(std::move(family));
  }
  return out;
}

}  // namespace ibfabric::fabric
