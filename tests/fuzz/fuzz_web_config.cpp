// libFuzzer target: the exporter-toolkit web config file (exporters/prometheus/web_config.h) and
// the Authorization header parser (basic_auth.h), both fed from outside the daemon: the file by
// whoever writes it, the header by any HTTP client. ConfigError is the expected answer to a bad
// file; parse_header answers nullopt to a bad header and must not throw.

#include "config/config_section.h"
#include "exporters/prometheus/basic_auth.h"
#include "exporters/prometheus/web_config.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)ibfabric::parse_web_config(text, "web.yml");
  } catch (const ibfabric::ConfigError&) {
  }
  auto credentials = ibfabric::BasicAuth::parse_header(std::string_view(text));
  if (credentials && credentials->first.find(':') != std::string::npos) __builtin_trap();
  return 0;
}
