// The HTTP endpoint's caps (exporters/prometheus/connection_table.*) without sockets: which
// connection may open, which makes way, and what is counted. tests/e2e's slow-client and
// flood tests drive the same rules through real connections.

#include "exporters/prometheus/connection_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ibfabric {
namespace {

using State = ConnectionTable::State;
using Stats = HttpServer::Stats;

// A connection as the table sees it: aborted or not.
struct Recorded : ConnectionTable::Connection {
  void abort() override { aborted = true; }
  bool aborted = false;
};

const auto kA = boost::asio::ip::make_address("10.0.0.1");
const auto kB = boost::asio::ip::make_address("10.0.0.2");

struct Table {
  explicit Table(std::size_t total, std::size_t per_client) {
    limits.max_connections = total;
    limits.max_connections_per_client = per_client;
  }
  std::shared_ptr<Recorded> open(const boost::asio::ip::address& client, State state) {
    if (!table.admit(client, limits)) return nullptr;
    auto c = std::make_shared<Recorded>();
    table.enter(c, client, state);
    held.push_back(c);
    return c;
  }
  WebLimits limits;
  Stats stats;
  ConnectionTable table{stats};
  std::vector<std::shared_ptr<Recorded>> held;
};

TEST(ConnectionTable, AtAClientsCapItsOldestWaitingConnectionMakesWay) {
  Table t(10, 2);
  auto first = t.open(kA, State::idle);
  auto second = t.open(kA, State::headers);
  auto other = t.open(kB, State::idle);
  ASSERT_TRUE(first && second && other);
  EXPECT_TRUE(t.open(kA, State::headers));
  EXPECT_TRUE(first->aborted);  // the oldest of kA's
  EXPECT_FALSE(first->entry);
  EXPECT_FALSE(second->aborted);
  EXPECT_FALSE(other->aborted);  // another client's is no part of kA's cap
  EXPECT_EQ(t.stats.evicted[Stats::client_cap][Stats::idle], 1u);
  EXPECT_EQ(t.stats.open_connections, 3u);
}

TEST(ConnectionTable, AConnectionBeingServedIsNeverEvicted) {
  Table t(10, 2);
  auto first = t.open(kA, State::busy);
  auto second = t.open(kA, State::busy);
  EXPECT_FALSE(t.open(kA, State::headers));
  EXPECT_FALSE(first->aborted || second->aborted);
  EXPECT_EQ(t.stats.rejected_per_client, 1u);
  // Once one waits on its client again, it makes way.
  ConnectionTable::set_state(*second, State::idle);
  EXPECT_TRUE(t.open(kA, State::headers));
  EXPECT_TRUE(second->aborted);
}

TEST(ConnectionTable, AtTheTotalCapTheOldestWaitingOfAnyClientMakesWay) {
  Table t(2, 16);
  auto handshake = t.open(kA, State::tls_handshake);
  auto busy = t.open(kB, State::busy);
  EXPECT_TRUE(t.open(kB, State::headers));
  EXPECT_TRUE(handshake->aborted);
  EXPECT_FALSE(busy->aborted);
  EXPECT_EQ(t.stats.evicted[Stats::total_cap][Stats::tls_handshake], 1u);
  ConnectionTable::set_state(*t.held.back(), State::busy);
  EXPECT_FALSE(t.open(kA, State::headers));  // every one under the cap is served
  EXPECT_EQ(t.stats.rejected, 1u);
  // A connection that closes frees its slot.
  t.table.leave(*busy);
  EXPECT_TRUE(t.open(kA, State::headers));
  EXPECT_EQ(t.stats.open_connections, 2u);
}

}  // namespace
}  // namespace ibfabric
