// The HTTP endpoint: `/-/healthy` and `/-/ready` with a readiness callback the test controls
// (the daemon's callback lists the enabled collectors that have not published yet), streamed
// bodies, and clients that hang up mid-request.

#include "exporters/prometheus/http_server.h"

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace ibfabric {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

struct Reply {
  unsigned status = 0;
  std::string body;
};

// A server on a free loopback port, with the default limits.
HttpServerOptions on_loopback() {
  HttpServerOptions options;
  options.listen_address = "127.0.0.1:0";
  return options;
}

ScrapeResponse up(const ScrapeRequest&) { return ScrapeResponse{200, "up 1\n", false, nullptr}; }

// Writes a GET of `target` that asks the server to close after its response.
void write_get(asio::ip::tcp::socket& socket, const std::string& target) {
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(false);
  http::write(socket, req);
}

// One GET on a new connection, from the test's thread (the server runs on the main thread).
Reply get(std::uint16_t port, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  write_get(socket, target);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {res.result_int(), res.body()};
}

TEST(HttpServer, ReadyWaitsForEveryCollectorAndHealthyDoesNot) {
  asio::io_context io;
  std::atomic<int> published{0};
  auto options = on_loopback();
  options.not_ready = [&] {
    std::vector<std::string> waiting;
    if (published < 1) waiting.push_back("ports");
    if (published < 2) waiting.push_back("sm");
    return waiting;
  };
  HttpServer server(io, options, up);
  std::vector<Reply> replies;
  std::thread client([&] {
    replies.push_back(get(server.port(), "/-/ready"));
    replies.push_back(get(server.port(), "/-/healthy"));
    published = 1;
    replies.push_back(get(server.port(), "/-/ready"));
    published = 2;
    replies.push_back(get(server.port(), "/-/ready?verbose=1"));
    asio::post(io, [&] { io.stop(); });
  });
  io.run();
  client.join();
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0].status, 503u);
  EXPECT_EQ(replies[0].body, "not ready: no collection yet from ports, sm\n");
  EXPECT_EQ(replies[1].status, 200u);
  EXPECT_EQ(replies[2].status, 503u);
  EXPECT_EQ(replies[2].body, "not ready: no collection yet from sm\n");
  EXPECT_EQ(replies[3].status, 200u);
  EXPECT_EQ(server.stats().unavailable, 2u);
}

TEST(HttpServer, ReadyWithoutACallbackIsReady) {
  asio::io_context io;
  HttpServer server(io, on_loopback(), up);
  Reply reply;
  std::thread client([&] {
    reply = get(server.port(), "/-/ready");
    asio::post(io, [&] { io.stop(); });
  });
  io.run();
  client.join();
  EXPECT_EQ(reply.status, 200u);
}

// A body of `slices` numbered lines of 1 KiB each, one per next(); counts itself alive.
class CountingBody : public ScrapeBody {
 public:
  CountingBody(int slices, std::atomic<int>& alive) : left_(slices), alive_(alive) { ++alive_; }
  ~CountingBody() override { --alive_; }
  bool next(std::string& out) override {
    if (left_ == 0) return false;
    std::string line = std::to_string(left_--) + " ";
    out += line + std::string(1023 - line.size(), 'x') + "\n";
    return true;
  }
  static std::string expected(int slices) {
    std::string all;
    for (int i = slices; i > 0; --i) {
      std::string line = std::to_string(i) + " ";
      all += line + std::string(1023 - line.size(), 'x') + "\n";
    }
    return all;
  }

 private:
  int left_;
  std::atomic<int>& alive_;
};

// A streamed body goes out chunked in HTTP/1.1 (on a keep-alive connection that serves the
// next request), up to the close in HTTP/1.0, and not at all for HEAD; the body is released
// when its response ends.
TEST(HttpServer, StreamsABodyChunkedAndReleasesIt) {
  asio::io_context io;
  std::atomic<int> alive{0};
  HttpServer server(io, on_loopback(), [&](const ScrapeRequest&) {
    ScrapeResponse response;
    response.stream = std::make_unique<CountingBody>(300, alive);
    return response;
  });
  struct Result {
    unsigned status;
    bool chunked;
    std::string body;
  };
  std::vector<Result> results;
  int alive_between = -1;
  std::thread client([&] {
    asio::io_context cio;
    asio::ip::tcp::socket socket(cio);
    socket.connect({asio::ip::make_address("127.0.0.1"), server.port()});
    boost::beast::flat_buffer buffer;
    for (auto verb : {http::verb::get, http::verb::head, http::verb::get}) {
      http::request<http::empty_body> req{verb, "/metrics", 11};
      req.set(http::field::host, "127.0.0.1");
      http::write(socket, req);
      http::response_parser<http::string_body> parser;
      parser.body_limit(16 << 20);
      if (verb == http::verb::head) parser.skip(true);
      http::read(socket, buffer, parser);
      results.push_back({parser.get().result_int(), parser.get().chunked(), parser.get().body()});
      if (results.size() == 1) alive_between = alive.load();
    }
    // HTTP/1.0: no chunks; the body ends at the close.
    asio::ip::tcp::socket old(cio);
    old.connect({asio::ip::make_address("127.0.0.1"), server.port()});
    http::request<http::empty_body> req{http::verb::get, "/metrics", 10};
    http::write(old, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(16 << 20);
    boost::beast::flat_buffer old_buffer;
    boost::beast::error_code ec;
    http::read(old, old_buffer, parser, ec);
    results.push_back({parser.get().result_int(), parser.get().chunked(), parser.get().body()});
    asio::post(io, [&] { io.stop(); });
  });
  io.run();
  client.join();
  ASSERT_EQ(results.size(), 4u);
  const std::string expected = CountingBody::expected(300);
  EXPECT_EQ(results[0].status, 200u);
  EXPECT_TRUE(results[0].chunked);
  EXPECT_EQ(results[0].body, expected);
  EXPECT_EQ(alive_between, 0);  // released once its last chunk was written
  EXPECT_EQ(results[1].status, 200u);
  EXPECT_EQ(results[1].body, "");
  EXPECT_EQ(results[2].body, expected);  // the keep-alive connection went on
  EXPECT_FALSE(results[3].chunked);
  EXPECT_EQ(results[3].body, expected);
  EXPECT_EQ(alive.load(), 0);
}

// What the server writes back on a connection that sends `bytes`, then stops sending.
std::string answer_to(std::uint16_t port, const std::string& bytes) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(socket, asio::buffer(bytes));
  socket.shutdown(asio::ip::tcp::socket::shutdown_send);
  std::string answer;
  boost::system::error_code ec;
  asio::read(socket, asio::dynamic_buffer(answer), ec);  // up to the server's close
  return answer;
}

// A request the server cannot read gets a 400; a client that hangs up in the middle of its
// request gets nothing, and is no bad request: a 400 written to it would only hold the
// connection busy, where the connection caps cannot evict it for a scrape (a soak's slow
// clients hanging up at once had a scrape refused that way).
TEST(HttpServer, AClientThatHangsUpMidRequestGetsNo400) {
  asio::io_context io;
  HttpServer server(io, on_loopback(), up);
  std::string garbled, hung_up, empty;
  Reply after;
  std::thread client([&] {
    garbled = answer_to(server.port(), "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n");
    hung_up = answer_to(server.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: aaa");
    empty = answer_to(server.port(), "");
    after = get(server.port(), "/metrics");
    asio::post(io, [&] { io.stop(); });
  });
  io.run();
  client.join();
  EXPECT_EQ(garbled.substr(0, 12), "HTTP/1.1 400");
  EXPECT_EQ(hung_up, "");
  EXPECT_EQ(empty, "");
  EXPECT_EQ(after.status, 200u);
  EXPECT_EQ(server.stats().bad_request, 1u);
  EXPECT_EQ(server.stats().ok, 1u);
}

// At the total cap, connections whose clients all hang up at once, and a scrape that arrives
// with their hang-ups (one turn of the loop sees them all), leave room for the scrape.
TEST(HttpServer, ClientsHangingUpAtTheCapLeaveRoomForAScrape) {
  asio::io_context io;
  auto options = on_loopback();
  options.limits.max_connections = 4;
  HttpServer server(io, options, up);
  const asio::ip::tcp::endpoint at{asio::ip::make_address("127.0.0.1"), server.port()};
  asio::io_context cio;
  std::vector<asio::ip::tcp::socket> slow;
  for (int i = 0; i < 4; ++i) {
    slow.emplace_back(cio).connect(at);
    asio::write(slow.back(), asio::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: x\r\n")));
  }
  // All four accepted, their headers awaited.
  for (int i = 0; i < 500 && server.stats().open_connections < 4; ++i) {
    io.run_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(server.stats().open_connections, 4u);
  for (auto& s : slow) s.close();
  asio::ip::tcp::socket scrape(cio);
  scrape.connect(at);
  write_get(scrape, "/metrics");
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  boost::beast::error_code ec;
  std::thread reader([&] {
    http::read(scrape, buffer, res, ec);
    asio::post(io, [&] { io.stop(); });
  });
  io.restart();
  io.run();
  reader.join();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_EQ(server.stats().rejected, 0u);
}

}  // namespace
}  // namespace ibfabric
