#include "ib/state_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string_view>
#include <vector>

namespace ibfabric::state {

using Clock = std::chrono::steady_clock;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Clock::time_point to_steady(double unix_time) {
  auto age = std::chrono::duration<double>(unix_now() - unix_time);
  return Clock::now() - std::chrono::duration_cast<Clock::duration>(age);
}

double to_unix(Clock::time_point t) {
  return unix_now() - std::chrono::duration<double>(Clock::now() - t).count();
}

StateStore::StateStore(boost::asio::io_context& io, std::string directory, std::string collector)
    : path_(directory.empty() ? "" : directory + "/" + collector + ".state"),
      collector_(std::move(collector)),
      writer_(io) {}

std::optional<State> StateStore::load() {
  if (!enabled()) return std::nullopt;
  remove_leftovers();
  auto result = state::load(path_);
  if (!result.state) {
    if (!result.error.empty()) {
      reject(result.error);
    } else {
      spdlog::info("{}: no state file yet file=\"{}\"", collector_, path_);
    }
    return std::nullopt;
  }
  if (result.state->collector != collector_) {
    reject("written by collector \"" + result.state->collector + "\"");
    return std::nullopt;
  }
  return std::move(result.state);
}

void StateStore::remove_leftovers() {
  // Temporary files of writes a crash interrupted (write_atomically names them
  // <file>.tmp.<pid>.<n>); never the file itself.
  std::error_code ec;
  auto path = std::filesystem::path(path_);
  auto prefix = path.filename().string() + ".tmp.";
  for (std::filesystem::directory_iterator it(path.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string().starts_with(prefix)) {
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
    }
  }
}

void StateStore::reject(const std::string& why) {
  ++ignored_;
  spdlog::warn("{}: state file ignored file=\"{}\" error=\"{}\"", collector_, path_, why);
}

void StateStore::save_text(std::string content) {
  if (!accepts()) return;
  auto now = Clock::now();
  // The last state written is known by a hash of its text without its "saved" line: a copy of
  // it cost about 140 octets per remembered cable for as long as the daemon runs.
  std::string_view text(content);
  auto saved_at = text.find("\nsaved ");
  auto saved_end = text.find('\n', saved_at + 1);
  std::hash<std::string_view> hash;
  const std::size_t fingerprint =
      hash(text.substr(0, saved_at)) * 31 + hash(text.substr(std::min(saved_end, text.size())));
  if (last_written_) {
    if (*last_written_ == fingerprint) return;
    if (now - last_write_ < kMinWriteInterval) return;
  }
  last_write_ = now;
  last_written_ = fingerprint;
  auto error = writer_.start([this, path = path_, content = std::move(content)]() -> OffLoop::Then {
    auto why = write_atomically(path, content);
    return [this, why = std::move(why)] {
      if (why.empty()) {
        ++writes_;
        if (failing_) spdlog::info("{}: state file written again file=\"{}\"", collector_, path_);
        failing_ = false;
        return;
      }
      ++write_failures_;
      // Written again at the next chance, not only after the next change.
      last_written_.reset();
      if (!failing_) {
        spdlog::warn("{}: state file not written file=\"{}\" error=\"{}\"", collector_, path_, why);
      }
      failing_ = true;
    };
  });
  if (!error.empty()) {
    ++write_failures_;
    last_written_.reset();
  }
}

void StateStore::fill_metrics(MetricsBuilder& out) const {
  if (!enabled()) return;
  const Labels l{{"collector", collector_}};
  out.counter("ibfabric_state_files_ignored_total",
              "State files found at start and ignored (unreadable, truncated, another version, "
              "another collector, node or subnet); the collector started without them.",
              l, static_cast<double>(ignored_));
  out.gauge("ibfabric_state_restored_links",
            "Remembered cables restored from the state file at start.", l, restored_);
  out.counter("ibfabric_state_writes_total", "State files written (atomically).", l,
              static_cast<double>(writes_));
  out.counter("ibfabric_state_write_failures_total",
              "State file writes that failed (read-only or full disk, missing directory); only "
              "the persistence is lost.",
              l, static_cast<double>(write_failures_));
}

}  // namespace ibfabric::state
