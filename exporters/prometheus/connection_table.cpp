#include "exporters/prometheus/connection_table.h"

#include <spdlog/spdlog.h>

namespace ibfabric {

// Evicting the oldest connection that waits on its client: a new connection is more likely a
// scrape than one that has been slow so far. Rejects when every connection under the cap is
// busy serving.
bool ConnectionTable::admit(const boost::asio::ip::address& client, const WebLimits& limits) {
  auto count = [&] {
    auto it = per_client_.find(client);
    return it == per_client_.end() ? std::size_t{0} : it->second;
  };
  while (count() >= limits.max_connections_per_client) {
    if (!evict(&client, HttpServer::Stats::client_cap)) {
      ++stats_.rejected_per_client;
      return false;
    }
  }
  while (entries_.size() >= limits.max_connections) {
    if (!evict(nullptr, HttpServer::Stats::total_cap)) {
      ++stats_.rejected;
      return false;
    }
  }
  return true;
}

// Closes the connection (of `client`, or any) that has waited on its client longest.
bool ConnectionTable::evict(const boost::asio::ip::address* client, HttpServer::Stats::Cap cap) {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->state == State::busy || (client && it->client != *client)) continue;
    if (oldest == entries_.end() || it->since < oldest->since) oldest = it;
  }
  if (oldest == entries_.end()) return false;
  auto phase = oldest->state == State::tls_handshake ? HttpServer::Stats::tls_handshake
               : oldest->state == State::idle        ? HttpServer::Stats::idle
                                                     : HttpServer::Stats::headers;
  ++stats_.evicted[cap][phase];
  spdlog::debug("msg=\"connection evicted\" client={} phase={} cap={}", oldest->client.to_string(),
                HttpServer::phase_name(phase), HttpServer::cap_name(cap));
  if (auto connection = oldest->connection.lock()) {
    leave(*connection);
    connection->abort();  // its pending operation ends with an error and closes it
  } else {
    forget(oldest);
  }
  return true;
}

void ConnectionTable::enter(const std::shared_ptr<Connection>& connection,
                            const boost::asio::ip::address& client, State state) {
  entries_.push_back(Entry{client, state, std::chrono::steady_clock::now(), connection});
  connection->entry = std::prev(entries_.end());
  ++per_client_[client];
  stats_.open_connections = entries_.size();
}

void ConnectionTable::leave(Connection& connection) {
  if (!connection.entry) return;
  auto it = *connection.entry;
  connection.entry.reset();
  forget(it);
}

void ConnectionTable::forget(Entries::iterator it) {
  if (auto pc = per_client_.find(it->client); pc != per_client_.end() && --pc->second == 0) {
    per_client_.erase(pc);
  }
  entries_.erase(it);
  stats_.open_connections = entries_.size();
}

void ConnectionTable::set_state(Connection& connection, State state) {
  if (!connection.entry) return;
  (*connection.entry)->state = state;
  (*connection.entry)->since = std::chrono::steady_clock::now();
}

}  // namespace ibfabric
