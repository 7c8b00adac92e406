// libFuzzer target: the state file of the MAD collectors (ib/state_file.h), which the
// daemon reads at start from its state directory. A rejected file is the expected answer to bad
// input; an exception, a crash or a sanitizer report is a bug, and so is a parsed state that
// does not survive writing and reading back (after one normalisation of its numbers).

#include "ib/state_file.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ibfabric::state::parse(text);
  if (parsed.state.has_value() == !parsed.error.empty()) std::abort();
  if (!parsed.state) return 0;
  auto once = ibfabric::state::serialize(*parsed.state);
  auto again = ibfabric::state::parse(once);
  if (!again.state) std::abort();
  if (ibfabric::state::serialize(*again.state) != once) std::abort();
  if (again.state->links.size() != parsed.state->links.size()) std::abort();
  for (std::size_t i = 0; i < again.state->links.size(); ++i) {
    const auto& a = again.state->links[i];
    const auto& b = parsed.state->links[i];
    if (a.device != b.device || a.name != b.name || a.remote_name != b.remote_name ||
        a.guid != b.guid || a.remote_guid != b.remote_guid || a.port != b.port) {
      std::abort();
    }
  }
  return 0;
}
