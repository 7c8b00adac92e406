#pragma once
// Which connections of the HTTP endpoint may open, and which makes way (http_server.h): a cap
// per client address and a total cap, and at either the connection that has waited on its
// client longest (in a TLS handshake, on a request's headers, idle) is evicted, never one being
// served. The scheduling half of the endpoint; the transport (sockets, TLS, HTTP) is
// http_server.cpp's. Loop thread only.

#include "config/config.h"
#include "exporters/prometheus/http_server.h"

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <optional>

namespace ibfabric {

class ConnectionTable {
 public:
  // What an open connection is doing. All but `busy` wait on the client, may be evicted and
  // run against a deadline of their own.
  enum class State { tls_handshake, headers, idle, busy };

  struct Connection;
  struct Entry {
    boost::asio::ip::address client;
    State state;
    std::chrono::steady_clock::time_point since;  // when it entered `state`
    std::weak_ptr<Connection> connection;
  };
  using Entries = std::list<Entry>;
  // What the table needs of a connection.
  struct Connection {
    virtual ~Connection() = default;
    // Closes it; whatever is pending on it completes with an error.
    virtual void abort() = 0;
    std::optional<Entries::iterator> entry;  // empty once it is closed or evicted
  };

  // Counts rejections and evictions, and the open connections, in `stats`.
  explicit ConnectionTable(HttpServer::Stats& stats) : stats_(stats) {}

  // Whether a connection from `client` may open under `limits`, evicting as the caps need.
  bool admit(const boost::asio::ip::address& client, const WebLimits& limits);
  void enter(const std::shared_ptr<Connection>& connection, const boost::asio::ip::address& client,
             State state);
  // Closed (or evicted): no longer counted.
  void leave(Connection& connection);
  static void set_state(Connection& connection, State state);

 private:
  bool evict(const boost::asio::ip::address* client, HttpServer::Stats::Cap cap);
  void forget(Entries::iterator it);

  HttpServer::Stats& stats_;
  Entries entries_;  // every open connection, in the order they opened
  std::map<boost::asio::ip::address, std::size_t> per_client_;
};

}  // namespace ibfabric
