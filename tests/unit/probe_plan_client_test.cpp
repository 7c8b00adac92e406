// The probe plan's client over real loopback TCP (core/http_client.h underneath, which the
// store's client shares): a plan, an error status, a body that is not a plan, one over the size
// limit, a server that never answers, and nobody listening, each with what the daemon logs.

#include "collectors/probe/probe_plan_client.h"
#include "tests/fuzz/loopback_store.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ibfabric::probe {
namespace {

using namespace std::chrono_literals;

struct Fetched {
  std::optional<std::vector<std::uint64_t>> plan;
  std::string error;
  std::string request;  // as the server read it
};

Fetched fetch_from(std::function<std::string()> answer, std::chrono::nanoseconds timeout = 2s) {
  boost::asio::io_context io;
  Fetched out;
  fuzz::LoopbackStore store(io, [&](const std::string& request) {
    out.request = request;
    return answer();
  });
  PlanClient client(io, store.url() + "/probe-plan");
  bool done = false;
  client.fetch(0x0002c90300000a00, timeout, [&](auto plan, std::string error) {
    out.plan = std::move(plan);
    out.error = std::move(error);
    done = true;
    store.close();
  });
  io.run_for(10s);
  EXPECT_TRUE(done);
  return out;
}

std::string http_answer(const std::string& status, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

TEST(ProbePlanClient, FetchesThePlanOfThisNode) {
  auto got = fetch_from([] {
    return http_answer("200 OK", "# plan\n0x0002c90300000b00 gpu-02\n0x0002c90300000c00 gpu-03\n");
  });
  EXPECT_EQ(got.error, "");
  ASSERT_TRUE(got.plan);
  EXPECT_EQ(*got.plan, (std::vector<std::uint64_t>{0x0002c90300000b00, 0x0002c90300000c00}));
  EXPECT_EQ(got.request.rfind("GET /probe-plan?node_guid=0x0002c90300000a00 HTTP/1.1\r\n", 0), 0u)
      << got.request;
  EXPECT_NE(got.request.find("User-Agent: ibfabricd\r\n"), std::string::npos) << got.request;
}

TEST(ProbePlanClient, SaysWhatFailed) {
  auto status = fetch_from([] { return http_answer("404 Not Found", "no such node\n"); });
  EXPECT_FALSE(status.plan);
  EXPECT_EQ(status.error, "HTTP 404");

  auto garbage = fetch_from([] { return http_answer("200 OK", "<html>proxy error</html>\n"); });
  EXPECT_FALSE(garbage.plan);
  EXPECT_EQ(garbage.error, "not a probe plan (a line is neither # nor a GUID)");

  // A plan is a few lines: a body over 1 MiB fails on its Content-Length, before it is read.
  auto huge = fetch_from([] { return http_answer("200 OK", std::string(2 << 20, '#')); });
  EXPECT_FALSE(huge.plan);
  EXPECT_EQ(huge.error.rfind("the answer is larger than 1048576 bytes", 0), 0u) << huge.error;
}

TEST(ProbePlanClient, ADeadlineEndsAServerThatNeverAnswers) {
  boost::asio::io_context io;
  // Accepts (the kernel's backlog) and never reads or answers.
  boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  PlanClient client(io, "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()));
  std::string error = "not called";
  client.fetch(1, 200ms, [&](auto plan, std::string e) {
    EXPECT_FALSE(plan);
    error = std::move(e);
  });
  io.run_for(5s);
  EXPECT_EQ(error, "no answer within 200 ms");
}

TEST(ProbePlanClient, NobodyListening) {
  boost::asio::io_context io;
  std::uint16_t port;
  {
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  PlanClient client(io, url);
  std::string error = "not called";
  client.fetch(1, 2s, [&](auto plan, std::string e) {
    EXPECT_FALSE(plan);
    error = std::move(e);
  });
  io.run_for(5s);
  EXPECT_EQ(error.rfind("connecting to " + url + ": ", 0), 0u) << error;
}

}  // namespace
}  // namespace ibfabric::probe
