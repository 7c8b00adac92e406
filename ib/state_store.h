#pragma once
// One collector's state file under the state directory (ib/state_file.h has the
// format): read once at start, written atomically off the event loop at a bounded rate.
// Whatever goes wrong (a missing directory, a read-only or full disk, a file that is not a
// state of this version) costs the persistence only: one warning when it starts, counted in
// ibfabric_state_* series, and the collector goes on without it.

#include "core/metrics.h"
#include "core/off_loop.h"
#include "ib/state_file.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ibfabric::state {

// Unix time now, and conversions between the steady clock (what collectors keep) and Unix
// time (what the file holds).
double unix_now();
std::chrono::steady_clock::time_point to_steady(double unix_time);
double to_unix(std::chrono::steady_clock::time_point t);

class StateStore {
 public:
  // Writes at most once per this, and only a state that changed since the last write.
  static constexpr std::chrono::seconds kMinWriteInterval{60};

  // `directory` "" turns persistence off (load() gives nothing, save() does nothing).
  StateStore(boost::asio::io_context& io, std::string directory, std::string collector);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Reads the file (on the calling thread: a small local file, once at start). Gives the state
  // when it is valid and names this collector; otherwise logs one warning (none for a file
  // that does not exist yet) and counts it.
  std::optional<State> load();

  // The caller found a valid file that is not for this fabric (another node, another subnet):
  // one warning, counted like an invalid file.
  void reject(const std::string& why);
  // Removes the temporary files of writes a crash interrupted (called by load()).
  void remove_leftovers();

  // Writes `state` off the loop when it differs from the last one written (its `saved` time
  // aside) and kMinWriteInterval has passed since the last write; a write still under way
  // skips this one. A failed write is logged when writes start failing and when they work
  // again, and counted.
  void save(const State& state) {
    if (accepts()) save_text(serialize(state));
  }
  // The same, of a state's text (StateText), which a caller builds only when accepts().
  bool accepts() const { return enabled() && !writer_.busy(); }
  void save_text(std::string content);

  // ibfabric_state_* series of this collector.
  void fill_metrics(MetricsBuilder& out) const;

 private:
  std::string path_;
  std::string collector_;
  OffLoop writer_;
  std::optional<std::size_t> last_written_;  // hash of what was written, `saved` left out
  std::chrono::steady_clock::time_point last_write_{};
  std::uint64_t ignored_ = 0;
  std::uint64_t writes_ = 0;
  std::uint64_t write_failures_ = 0;
  double restored_ = 0;  // links restored from the file at start
  bool failing_ = false;

 public:
  void set_restored(std::size_t n) { restored_ = static_cast<double>(n); }
};

}  // namespace ibfabric::state
