#pragma once
// A store on loopback for the fuzz targets of ibfabric-localize's reading side: it accepts
// connections on the io_context it is given, reads each request (whatever it is) and writes
// back what `answer` makes of the request's bytes, raw (status line and headers included), then
// closes. The client under test runs on the same io_context: the exchange is real TCP.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <functional>
#include <memory>
#include <string>

namespace ibfabric::fuzz {

class LoopbackStore {
 public:
  using Answer = std::function<std::string(const std::string& request)>;
  LoopbackStore(boost::asio::io_context& io, Answer answer)
      : acceptor_(io, {boost::asio::ip::make_address("127.0.0.1"), 0}), answer_(std::move(answer)) {
    accept();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  void close() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  struct Connection {
    explicit Connection(boost::asio::ip::tcp::socket s) : socket(std::move(s)) {}
    boost::asio::ip::tcp::socket socket;
    boost::asio::streambuf in;
    std::string out;
  };
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
      auto c = std::make_shared<Connection>(std::move(s));
      // The request's headers, then its body (the client sends Content-Length and a form).
      boost::asio::async_read_until(
          c->socket, c->in, "\r\n\r\n", [this, c](boost::system::error_code ec, std::size_t) {
            if (ec) return;
            std::string head(boost::asio::buffers_begin(c->in.data()),
                             boost::asio::buffers_end(c->in.data()));
            auto at = head.find("Content-Length: ");
            std::size_t length = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
            std::size_t have = head.size() - head.find("\r\n\r\n") - 4;
            auto reply = [this, c] {
              std::string request(boost::asio::buffers_begin(c->in.data()),
                                  boost::asio::buffers_end(c->in.data()));
              c->out = answer_(request);
              boost::asio::async_write(c->socket, boost::asio::buffer(c->out),
                                       [c](boost::system::error_code, std::size_t) {
                                         boost::system::error_code ignored;
                                         c->socket.shutdown(
                                             boost::asio::ip::tcp::socket::shutdown_both, ignored);
                                       });
            };
            if (have >= length) return reply();
            boost::asio::async_read(c->socket, c->in, boost::asio::transfer_exactly(length - have),
                                    [reply](boost::system::error_code ec, std::size_t) {
                                      if (!ec) reply();
                                    });
          });
      accept();
    });
  }
  boost::asio::ip::tcp::acceptor acceptor_;
  Answer answer_;
};

}  // namespace ibfabric::fuzz
