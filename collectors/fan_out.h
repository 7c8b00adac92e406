#pragma once
// What the MAD collectors (`ports`, `sm`, `fabric`) share to send one collection's queries: a
// fan-out that sends them all at once and runs its end when the last one settles, the checks
// every answer gets, and the log-once counting of failed queries.

#include "mad/engine.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace ibfabric {

// One collection's MAD queries, all in flight at once (the engine paces them). A collector's
// pass derives from it, is made with std::make_shared, and asks from launch() and from the
// handlers of earlier answers; settled() runs once, on the loop, when the last query has
// answered or failed. Each pending query holds the pass alive; if the collector (and with it
// the engine's Client) goes away first, the callbacks are dropped and so is the pass.
class FanOut : public std::enable_shared_from_this<FanOut> {
 public:
  virtual ~FanOut() = default;

 protected:
  explicit FanOut(mad::ClientHandle& mad) : mad_(mad) {}

  // Runs `first`, which asks the first queries, held open so that an answer arriving meanwhile
  // cannot settle the fan-out before they are all out. Settles at once when nothing was asked.
  void launch(const std::function<void()>& first);

  // Submits `request`; when it is done, an answer with less than `min_size` octets of
  // attribute data is turned into a failure (mad::Status::mad_status, "answer too short"), then
  // `on_done` runs with it, ok or not, then the query settles.
  void ask(mad::Request request, std::size_t min_size,
           std::function<void(const mad::Response&)> on_done);

  // Queries asked so far (retries not counted).
  int asked() const { return asked_; }

  virtual void settled() = 0;

 private:
  void settle();

  mad::ClientHandle& mad_;
  int outstanding_ = 0;
  int asked_ = 0;
};

// Logs a query when it starts failing and again when it works, not on every pass: "<collector>:
// query failed <subject> result=... error=\"...\"" and "<collector>: query works again
// <subject>". `subject` names the query in key=value form ("device=mlx5_0 port=1
// query=port_info").
class FailureLog {
 public:
  explicit FailureLog(std::string collector) : collector_(std::move(collector)) {}
  // `subject` is only called when needed (a failure, or an answer while anything is failing).
  void note(const mad::Response& r, const std::function<std::string()>& subject);

 private:
  std::string collector_;
  std::set<std::string> failing_;
};

// A collector's failed queries, counted since start by `Key` (the label values of its
// *_query_errors_total series) and logged through a FailureLog.
template <class Key>
class QueryErrors {
 public:
  explicit QueryErrors(std::string collector) : log_(std::move(collector)) {}
  void note(const mad::Response& r, const Key& key, const std::function<std::string()>& subject) {
    if (!r.ok()) counts_[key]++;
    log_.note(r, subject);
  }
  const std::map<Key, std::uint64_t>& counts() const { return counts_; }

 private:
  FailureLog log_;
  std::map<Key, std::uint64_t> counts_;
};

}  // namespace ibfabric
