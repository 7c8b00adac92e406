#pragma once
// The local InfiniBand ports, listed off the event loop. Listing them reads sysfs through
// libibumad (mad::list_infiniband_ports), and on a real host such a read can block for as long
// as the HCA's firmware takes; the MAD collectors, which run on the loop, ask here instead. The
// listing runs on a thread of its own (core/off_loop.h) and is bounded by a deadline; at
// most one is outstanding per PortListing: until one that passed its deadline returns, every
// list() fails at once with the same error (so the run fails, and the runner logs it once).

#include "core/off_loop.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::mad {

class PortListing {
 public:
  using Lister = std::function<std::vector<LocalPort>()>;
  // ports: nullopt when the listing failed; error says why.
  using Done = std::function<void(std::optional<std::vector<LocalPort>> ports, std::string error)>;
  static constexpr std::chrono::seconds kDefaultDeadline{5};

  // `lister` runs on the worker thread (a copy of it); by default the InfiniBand ports of the
  // CAs in `only` (all when empty).
  PortListing(boost::asio::io_context& io, Lister lister,
              std::chrono::nanoseconds deadline = kDefaultDeadline);
  static Lister infiniband(std::set<std::string> only);
  ~PortListing();

  // `done` runs on the loop: with the ports, or with nullopt and an error when the listing
  // passed its deadline, or an earlier one that did has not returned yet (then `done` runs
  // inside list()). It is not called once the PortListing is destroyed. One list() at a time.
  void list(Done done);

  // The error text of a listing past its deadline (and of the list() calls it makes fail).
  std::string stuck_error() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace ibfabric::mad
