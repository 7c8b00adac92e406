#pragma once
// Human names for InfiniBand nodes, as infiniband-diags gives them: a node-name-map entry
// first, then the node's NodeDescription (trimmed of its padding), then its GUID.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ibfabric {

// rdma-core's default map; a missing default file is no error (no names from a map).
inline constexpr const char* kDefaultNodeNameMap = "/etc/rdma/ib-node-name-map";

// infiniband-diags' node-name-map format, the file `ibnetdiscover --node-name-map` reads: one
// `GUID "name"` per line (GUID as 0x-hex or decimal), `#` starts a comment, blank lines are
// ignored. The first entry of a GUID wins, as in rdma-core.
class NodeNameMap {
 public:
  // Throws ConfigError "FILE:LINE: ..." for a line that is not `GUID "name"`.
  static NodeNameMap parse(std::string_view text, const std::string& file);
  // Reads `path`. A missing file is an error unless `missing_ok` (the default path).
  static std::shared_ptr<const NodeNameMap> load(const std::string& path, bool missing_ok);

  // The map's name for `guid`, or nullptr.
  const std::string* find(std::uint64_t guid) const;
  // The name to show: the map's, else `description` trimmed, else the GUID (0x%016x).
  std::string name(std::uint64_t guid, std::string_view description) const;

  std::size_t size() const { return names_.size(); }
  bool same_names(const NodeNameMap& other) const { return names_ == other.names_; }
  const std::string& source() const { return source_; }

 private:
  std::unordered_map<std::uint64_t, std::string> names_;
  std::string source_;  // the file, or "" when there is none
};

// A NodeDescription as shown: without the NUL and space padding of the 64-octet field and
// without leading blanks.
std::string trim_node_description(std::string_view description);

}  // namespace ibfabric
