// The engine's `mad:` config section.
#include "mad/engine.h"

namespace ibfabric::mad {

EngineConfig parse_engine_config(ConfigSection& section) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  EngineConfig c;
  c.ca = section.get_string("ca", c.ca);
  c.port = static_cast<int>(section.get_int("port", c.port, 0, 254));
  c.timeout = duration_cast<milliseconds>(
      section.get_duration("timeout", c.timeout, std::chrono::milliseconds{1}));
  c.retries = static_cast<int>(section.get_int("retries", c.retries, 0, 20));
  c.max_in_flight = static_cast<int>(section.get_int("max_in_flight", c.max_in_flight, 1, 4096));
  c.max_in_flight_per_destination = static_cast<int>(
      section.get_int("max_in_flight_per_destination", c.max_in_flight_per_destination, 1, 256));
  c.rate_limit = section.get_double("rate_limit", c.rate_limit, 0, 1e9);
  c.rate_burst = static_cast<int>(section.get_int("rate_burst", c.rate_burst, 1, 1000000));
  c.max_queued = static_cast<std::size_t>(
      section.get_int("max_queued", static_cast<std::int64_t>(c.max_queued), 1, 100000000));
  c.reopen_backoff = duration_cast<milliseconds>(
      section.get_duration("reopen_backoff", c.reopen_backoff, std::chrono::milliseconds{1}));
  c.reopen_backoff_max = duration_cast<milliseconds>(section.get_duration(
      "reopen_backoff_max", c.reopen_backoff_max, std::chrono::milliseconds{1}));
  if (c.reopen_backoff_max < c.reopen_backoff) {
    section.fail("reopen_backoff_max", "must not be shorter than reopen_backoff");
  }
  section.finish();
  return c;
}

}  // namespace ibfabric::mad
