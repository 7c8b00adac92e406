#pragma once
// What the MAD collectors remember across a restart (docs/design.md, "State that survives a
// restart"): the cables they have seen (link memory) and who was at the far end, in a small
// versioned text file per collector under the state directory, written atomically (a
// temporary file, fsync, rename). The parser is strict and never throws: a file that is
// missing, truncated, of another version or not ours is rejected whole with the reason, and a
// collector then starts without it (tests/fuzz/fuzz_state_file.cpp fuzzes it).
//
//   ibfabric-state 1 fabric
//   origin 0x0002c90300000001
//   saved 1764064800.250
//   link 0xfe80000000000000 - 0x0002c90200400001 5 0x0002c90200400002 1 2 1764064790.000 leaf-01
//   spine-01 end 1
//
// Fields are separated by one space; text fields are percent-escaped (every byte below 0x21 or
// above 0x7e, and '%'), "-" is the empty string and "%2D" a lone dash. `end N` closes the
// file with the number of records: a file cut anywhere is rejected.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::state {

inline constexpr int kVersion = 1;
// A state file larger than this is not ours (a fabric of 100,000 switch ports is about 10 MB).
inline constexpr std::size_t kMaxFileSize = 64u << 20;

// One end of a remembered cable: port `port` of `guid` is cabled to port `remote_port` of
// `remote_guid`. The fabric collector records the switch end (device empty, names are the
// node names); the ports collector a local CA port (`device`, `guid` = the CA's node GUID,
// `name` its NodeDescription, `remote_name` the far end's NodeDescription).
struct LinkRecord {
  std::uint64_t subnet = 0;  // GID prefix of the local port the cable was seen from
  std::string device;
  std::uint64_t guid = 0;
  int port = 0;
  std::uint64_t remote_guid = 0;
  int remote_port = 0;
  int remote_type = 0;  // IB_NODE_CA, IB_NODE_SWITCH, IB_NODE_ROUTER; 0 unknown
  double seen = 0;      // Unix time the cable was last seen
  std::string name;
  std::string remote_name;
  bool operator==(const LinkRecord&) const = default;
};

struct State {
  std::string collector;     // "fabric" or "ports"
  std::uint64_t origin = 0;  // fabric: the GUID of the node discovery starts from; ports: 0
  double saved = 0;          // Unix time written
  std::vector<LinkRecord> links;
  bool operator==(const State&) const = default;
};

std::string serialize(const State& state);

// A state's text written one cable at a time: a collector that keeps its cables in a structure
// of its own writes them without first copying each into a LinkRecord (at 50,000 switch ports
// those copies were 7.2 MB beside the 6.4 MB text, the daemon's peak). serialize() uses it.
class StateText {
 public:
  StateText(std::string_view collector, std::uint64_t origin, double saved,
            std::size_t links_expected);
  void add(const LinkRecord& link);
  std::string finish() &&;  // the text, `end` line included

 private:
  std::string out_;
  std::size_t links_ = 0;
};

struct ParseResult {
  std::optional<State> state;
  std::string error;  // why there is no state ("" when there is)
};
// Never throws; `text` may be any bytes.
ParseResult parse(std::string_view text);

// Reads and parses `path`. A missing file gives no state and error "" (a first start);
// anything else that is not a state gives the reason.
ParseResult load(const std::string& path);

// Writes `content` to `path` through `path.tmp.<pid>.<n>` (written, fsynced, renamed over
// `path`).
// Returns "" or what failed (with strerror); a failure leaves `path` as it was.
std::string write_atomically(const std::string& path, const std::string& content);

// Escaping of text fields, exposed for the tests.
std::string escape(std::string_view text);
std::optional<std::string> unescape(std::string_view field);

}  // namespace ibfabric::state
