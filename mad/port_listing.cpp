#include "mad/port_listing.h"

#include <spdlog/fmt/fmt.h>

#include <boost/asio/steady_timer.hpp>

#include <exception>

namespace ibfabric::mad {

struct PortListing::State {
  State(boost::asio::io_context& io, Lister l, std::chrono::nanoseconds d)
      : worker(io), timer(io), lister(std::move(l)), deadline(d) {}

  // Hands the outcome of listing `id` to whoever asked, unless it was already given up on.
  void finish(std::uint64_t id, std::optional<std::vector<LocalPort>> ports, std::string error) {
    if (id != current || !done) return;  // late: its deadline already failed the run
    timer.cancel();
    auto d = std::move(done);
    done = nullptr;
    d(std::move(ports), std::move(error));
  }

  OffLoop worker;
  boost::asio::steady_timer timer;
  Lister lister;
  std::chrono::nanoseconds deadline;
  std::uint64_t current = 0;
  Done done;
};

PortListing::PortListing(boost::asio::io_context& io, Lister lister,
                         std::chrono::nanoseconds deadline)
    : state_(std::make_shared<State>(io, std::move(lister), deadline)) {}

PortListing::~PortListing() {
  state_->worker.close();
  state_->timer.cancel();
}

PortListing::Lister PortListing::infiniband(std::set<std::string> only) {
  return [only = std::move(only)] { return list_infiniband_ports(only); };
}

std::string PortListing::stuck_error() const {
  return fmt::format(
      "listing the local InfiniBand ports (libibumad, sysfs) did not finish within {:.3f}s; no "
      "new listing starts until it returns",
      std::chrono::duration<double>(state_->deadline).count());
}

void PortListing::list(Done done) {
  auto& s = *state_;
  if (s.worker.busy()) {
    done(std::nullopt, stuck_error());
    return;
  }
  const auto id = ++s.current;
  s.done = std::move(done);
  std::weak_ptr<State> weak = state_;
  s.timer.expires_after(s.deadline);
  s.timer.async_wait([weak, id, error = stuck_error()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto st = weak.lock()) st->finish(id, std::nullopt, error);
  });
  auto error = s.worker.start([lister = s.lister, weak, id]() -> OffLoop::Then {
    std::optional<std::vector<LocalPort>> ports;
    std::string error;
    try {
      ports = lister();
    } catch (const std::exception& e) {
      error = std::string("listing the local InfiniBand ports: ") + e.what();
    }
    return [weak, id, ports = std::move(ports), error = std::move(error)]() mutable {
      if (auto st = weak.lock()) st->finish(id, std::move(ports), std::move(error));
    };
  });
  if (!error.empty()) s.finish(id, std::nullopt, std::move(error));
}

}  // namespace ibfabric::mad
