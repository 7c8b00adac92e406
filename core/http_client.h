#pragma once
// One HTTP/1.1 exchange at a time per call, on the caller's io_context: resolve, connect, (TLS
// handshake, the host name checked), write, read, each step under one deadline, a connection of
// its own each (`Connection: close`). The answer's body is bounded: the header is read first,
// so that a Content-Length over the limit fails before the body is read. The programs' clients
// (ibfabric-localize's store client, the probe collector's plan client) say what they ask and
// what an answer means; this says only how it travels.

#include "core/http_url.h"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ibfabric {

struct HttpTls {
  std::string ca_file;                // "": the system's CA store
  std::string cert_file, key_file;    // a client certificate and its key (PEM), or none
  std::string server_name;            // what the certificate must name, and SNI; "": the host
  bool insecure_skip_verify = false;  // no check of the server's certificate at all
  std::string source;                 // where these came from, for messages ("" when built in)
};

struct HttpRequest {
  std::string method = "GET";  // GET or POST
  std::string target;          // path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;  // with a body
  std::string body;
};

struct HttpAnswer {
  enum class Failure : std::uint8_t { none, timeout, connection, too_large };
  Failure failure = Failure::none;
  std::string error;  // what failed, where ("" when it did not)
  unsigned status = 0;
  std::string body;
  std::chrono::nanoseconds duration{0};
};

class HttpClient {
 public:
  // url: where (the TLS context when https); tls: how, for https only. Throws
  // std::invalid_argument for TLS settings given to an http URL, or files that cannot be used.
  HttpClient(boost::asio::io_context& io, HttpUrl url, std::string url_text, HttpTls tls,
             std::string user_agent, std::size_t body_limit);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `done` runs on the io_context, once.
  void exchange(HttpRequest request, std::chrono::milliseconds timeout,
                std::function<void(HttpAnswer)> done);
  const HttpUrl& url() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ibfabric
