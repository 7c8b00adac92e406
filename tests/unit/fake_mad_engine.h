#pragma once
// A MAD engine for unit tests: keeps what is submitted until the test answers it.

#include "mad/engine.h"

#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace ibfabric::mad::test {

struct Submitted {
  Request request;
  Callback callback;
};

class FakeEngine final : public Engine {
 public:
  FakeEngine() : Engine(EngineConfig{}) {}
  void submit(Request request, Callback callback) override {
    queue.push_back({std::move(request), std::move(callback)});
  }
  std::unique_ptr<Service> serve(PortAddress, std::uint8_t, std::uint32_t, double,
                                 RequestHandler) override {
    return nullptr;
  }
  std::unique_ptr<Client> client() override { return std::make_unique<FakeClient>(queue); }
  std::optional<PortAddress> default_port() override { return std::nullopt; }
  // Kept until the test calls them.
  void open_default_port(std::function<void(std::string)> done) override {
    opens.push_back(std::move(done));
  }
  std::vector<std::function<void(std::string)>> opens;
  void fill_metrics(MetricsBuilder&) const override {}

  // Answers the oldest request with a full MAD of its class whose attribute data is `fill`.
  void answer(Status status = Status::ok, std::uint8_t fill = 0) {
    auto s = std::move(queue.front());
    queue.pop_front();
    Response r;
    r.status = status;
    if (status == Status::ok) {
      r.mad.assign(IB_MAD_SIZE, fill);
      r.mad[1] = s.request.mgmt_class;
    }
    s.callback(std::move(r));
  }
  std::deque<Submitted> queue;

 private:
  class FakeClient final : public Client {
   public:
    explicit FakeClient(std::deque<Submitted>& queue) : queue_(queue) {}
    void submit(Request request, Callback callback) override {
      queue_.push_back({std::move(request), std::move(callback)});
    }

   private:
    std::deque<Submitted>& queue_;
  };
};

}  // namespace ibfabric::mad::test
