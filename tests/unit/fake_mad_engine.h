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
  std::unique_ptr<Service> serve(PortAddress via, std::uint8_t mgmt_class, std::uint32_t oui,
                                 double max_per_second, RequestHandler handler) override {
    served.push_back({via, mgmt_class, oui, max_per_second, std::move(handler)});
    return std::make_unique<FakeService>(*this);
  }
  std::unique_ptr<Client> client() override { return std::make_unique<FakeClient>(queue); }
  std::optional<PortAddress> default_port() override { return port; }
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

  // Services (Engine::serve), in the order declared: what a responder would answer with.
  struct Served {
    PortAddress via;
    std::uint8_t mgmt_class = 0;
    std::uint32_t oui = 0;
    double max_per_second = 0;
    RequestHandler handler;
  };
  std::vector<Served> served;
  std::string serve_error;                  // what every Service::refresh() says ("" = serving)
  int refreshes = 0;                        // Service::refresh() calls
  std::uint64_t answered = 0, dropped = 0;  // what every Service reports
  std::optional<PortAddress> port;          // default_port(): unknown unless a test sets it

 private:
  class FakeService final : public Service {
   public:
    explicit FakeService(FakeEngine& engine) : engine_(engine) {}
    std::string refresh() override {
      ++engine_.refreshes;
      return engine_.serve_error;
    }
    std::uint64_t answered() const override { return engine_.answered; }
    std::uint64_t dropped() const override { return engine_.dropped; }

   private:
    FakeEngine& engine_;
  };

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
