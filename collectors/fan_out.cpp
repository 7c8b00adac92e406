#include "collectors/fan_out.h"

#include <spdlog/spdlog.h>

namespace ibfabric {

void FanOut::launch(const std::function<void()>& first) {
  ++outstanding_;
  first();
  settle();
}

void FanOut::ask(mad::Request request, std::size_t min_size,
                 std::function<void(const mad::Response&)> on_done) {
  ++outstanding_;
  ++asked_;
  mad_.client().submit(std::move(request), [self = shared_from_this(), min_size,
                                            on_done = std::move(on_done)](mad::Response r) {
    if (r.ok() && r.data_size() < min_size) {
      r.status = mad::Status::mad_status;
      r.error = "answer too short";
    }
    on_done(r);
    self->settle();
  });
}

void FanOut::settle() {
  if (--outstanding_ == 0) settled();
}

void FailureLog::note(const mad::Response& r, const std::function<std::string()>& subject) {
  if (r.ok()) {
    if (failing_.empty()) return;
    auto s = subject();
    if (failing_.erase(s)) spdlog::info("{}: query works again {}", collector_, s);
    return;
  }
  auto s = subject();
  if (failing_.insert(s).second) {
    spdlog::warn("{}: query failed {} result={} error=\"{}\"", collector_, s, to_string(r.status),
                 r.error);
  }
}

}  // namespace ibfabric
