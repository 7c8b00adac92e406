#include "collectors/fan_out.h"

#include "mad/attributes.h"

#include "collector_test_support.h"
#include "fake_fabric.h"

#include <gtest/gtest.h>

namespace ibfabric {
namespace {

using mad::ClientHandle;
using mad::Destination;
using mad::Engine;
using mad::Request;
using mad::Response;
using mad::Status;
using test_support::FakeFabric;

// A pass that asks two queries, a third from the first one's answer, and records its end.
class TestPass final : public FanOut {
 public:
  TestPass(ClientHandle& mad, std::vector<std::string>& log) : FanOut(mad), log_(log) {}
  void start(std::size_t min_size) {
    launch([this, min_size] {
      FanOut::ask(Request::pma_get(1, IB_GSI_PORT_COUNTERS), min_size, [this](const Response& r) {
        log_.push_back(std::string("first ") + to_string(r.status) + " " + r.error);
        FanOut::ask(Request::pma_get(1, IB_GSI_PORT_COUNTERS_EXT), 0, [this](const Response& r) {
          log_.push_back(std::string("third ") + to_string(r.status));
        });
      });
      FanOut::ask(Request::smp_get(Destination::by_route({}), IB_ATTR_NODE_INFO), 0,
                  [this](const Response& r) {
                    log_.push_back(std::string("second ") + to_string(r.status));
                  });
    });
  }
  void settled() override { log_.push_back("settled asked=" + std::to_string(asked())); }

 private:
  std::vector<std::string>& log_;
};

struct Fixture {
  boost::asio::io_context io;
  std::shared_ptr<FakeFabric> engine = std::make_shared<FakeFabric>(io, FakeFabric::Held{});
  ClientHandle handle{[this]() -> std::shared_ptr<Engine> { return engine; }};
  Fixture() { handle.engine(); }
};

TEST(FanOut, SettlesOnceAfterTheLastQueryIncludingOnesAskedFromAnswers) {
  Fixture f;
  std::vector<std::string> log;
  auto pass = std::make_shared<TestPass>(f.handle, log);
  pass->start(0);
  pass.reset();  // the pending callbacks keep it alive
  ASSERT_EQ(f.engine->held.size(), 2u);
  f.engine->answer_held();  // first: asks the third
  EXPECT_EQ(f.engine->held.size(), 2u);
  f.engine->answer_held(Status::timeout);  // second
  EXPECT_EQ(log.size(), 2u) << "settled before the third query answered";
  f.engine->answer_held();  // third
  EXPECT_EQ(log, (std::vector<std::string>{"first ok ", "second timeout", "third ok",
                                           "settled asked=3"}));
}

TEST(FanOut, LaunchWithNothingAskedSettlesAtOnce) {
  Fixture f;
  std::vector<std::string> log;
  class Empty final : public FanOut {
   public:
    Empty(ClientHandle& mad, std::vector<std::string>& log) : FanOut(mad), log_(log) {}
    void start() {
      launch([] {});
    }
    void settled() override { log_.push_back("settled"); }
    std::vector<std::string>& log_;
  };
  auto pass = std::make_shared<Empty>(f.handle, log);
  pass->start();
  EXPECT_EQ(log, std::vector<std::string>{"settled"});
}

TEST(FanOut, AnswerShorterThanItsAttributeIsAFailure) {
  Fixture f;
  std::vector<std::string> log;
  auto pass = std::make_shared<TestPass>(f.handle, log);
  // A PMA answer carries 192 octets of attribute data; asking for one more fails it.
  pass->start(IB_PC_DATA_SZ + 1);
  f.engine->answer_held();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0], "first mad_status answer too short");
  EXPECT_EQ(mad::attribute_size(IB_PERFORMANCE_CLASS), static_cast<std::size_t>(IB_PC_DATA_SZ));
  EXPECT_EQ(mad::attribute_size(IB_SMI_DIRECT_CLASS), static_cast<std::size_t>(IB_SMP_DATA_SIZE));
}

TEST(QueryErrors, CountsEveryFailureAndLogsOnlyWhenAQueryStartsOrStopsFailing) {
  test_support::LogCapture capture;
  QueryErrors<std::pair<std::string, int>> errors("test");
  Response ok;
  ok.status = Status::ok;
  Response failed;
  failed.status = Status::timeout;
  failed.error = "no answer";
  int built = 0;
  auto subject = [&](int port) {
    return [&built, port] {
      ++built;
      return "port=" + std::to_string(port);
    };
  };
  errors.note(ok, {"a", 1}, subject(1));
  EXPECT_EQ(built, 0) << "a subject built while nothing fails";
  errors.note(failed, {"a", 1}, subject(1));
  errors.note(failed, {"a", 1}, subject(1));
  errors.note(failed, {"a", 2}, subject(2));
  errors.note(ok, {"a", 1}, subject(1));
  errors.note(ok, {"a", 1}, subject(1));
  EXPECT_EQ(errors.counts().at({"a", 1}), 2u);
  EXPECT_EQ(errors.counts().at({"a", 2}), 1u);
  EXPECT_EQ(errors.counts().count({"a", 3}), 0u);
  EXPECT_EQ(capture.take(),
            (std::vector<std::string>{
                "warning test: query failed port=1 result=timeout error=\"no answer\"",
                "warning test: query failed port=2 result=timeout error=\"no answer\"",
                "info test: query works again port=1"}));
}

}  // namespace
}  // namespace ibfabric
