// `/-/healthy` and `/-/ready` of the HTTP endpoint, with a readiness callback the test controls
// (the daemon's callback lists the enabled collectors that have not published yet).

#include "exporters/prometheus/http_server.h"

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
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

// One GET on a new connection, from the test's thread (the server runs on the main thread).
Reply get(std::uint16_t port, const std::string& target) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.keep_alive(false);
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {res.result_int(), res.body()};
}

TEST(HttpServer, ReadyWaitsForEveryCollectorAndHealthyDoesNot) {
  asio::io_context io;
  std::atomic<int> published{0};
  HttpServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.not_ready = [&] {
    std::vector<std::string> waiting;
    if (published < 1) waiting.push_back("ports");
    if (published < 2) waiting.push_back("sm");
    return waiting;
  };
  HttpServer server(io, options, [] { return std::string("up 1\n"); });
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
  HttpServerOptions options;
  options.listen_address = "127.0.0.1:0";
  HttpServer server(io, options, [] { return std::string("up 1\n"); });
  Reply reply;
  std::thread client([&] {
    reply = get(server.port(), "/-/ready");
    asio::post(io, [&] { io.stop(); });
  });
  io.run();
  client.join();
  EXPECT_EQ(reply.status, 200u);
}

}  // namespace
}  // namespace ibfabric
