// libFuzzer target: the daemon's config file (config/config.h). A ConfigError is the expected
// answer to bad input; any other exception escaping, a crash or a sanitizer report is a bug.

#include "collectors/registry.h"
#include "config/config.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto config = ibfabric::parse_config(text, "fuzz.yaml", ibfabric::collector_defaults());
    // Every collector's factory would read its section next; finish() is what rejects unknown
    // keys there, so it runs over every section too.
    for (auto& c : config.collectors) {
      try {
        c.section.finish();
      } catch (const ibfabric::ConfigError&) {
      }
    }
    if (config.mad) {
      try {
        config.mad->finish();
      } catch (const ibfabric::ConfigError&) {
      }
    }
    (void)ibfabric::check_listen_address(config.listen_address);
  } catch (const ibfabric::ConfigError&) {
  }
  return 0;
}
