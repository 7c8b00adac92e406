#pragma once
// The probe collector's prober: what runs between its collections. The UDP and MAD probes to
// each peer (one timer each), their statistics, the UDP and MAD responders, the SA lookup of the
// targets and discovery, and this node's identity (ibfabric_probe_node_info). It lives as long
// as the collector, not one run, so it is not a `<Name>Run`: ProbeCollector (probe_collector.cpp)
// keeps the spec's config and the port listing, and hands each collection's listing here.
// Handlers hold it by shared_ptr; stop() cancels them all. Loop thread only.
//
// Unit tests drive it through the fake MAD engine (tests/unit/probe_run_test.cpp).

#include "collectors/collector.h"
#include "collectors/peer_directory.h"
#include "collectors/probe/mad_ping.h"
#include "collectors/probe/probe_collector.h"
#include "collectors/probe/probe_plan_client.h"
#include "collectors/probe/probe_stats.h"
#include "mad/engine.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ibfabric::probe {

// "IP:PORT", "[IPv6]:PORT", ":PORT" (every address). Throws std::runtime_error. Also what the
// spec checks `udp_listen` and a target's `address` with.
boost::asio::ip::udp::endpoint parse_endpoint(const std::string& text);

class ProbeRun : public std::enable_shared_from_this<ProbeRun> {
 public:
  // What the rotation slot of `rotate_every` is taken from: the wall clock, so that nodes rotate
  // together; a test's own to move the slot on.
  using WallClock = std::function<std::chrono::system_clock::time_point()>;

  ProbeRun(boost::asio::io_context& io, ProbeConfig config,
           std::function<std::shared_ptr<mad::Engine>()> mad_engine,
           std::shared_ptr<const NodeNameMap> node_names, std::shared_ptr<PeerDirectory> directory,
           WallClock wall_clock = &std::chrono::system_clock::now);

  // Opens the sockets and starts probing the configured peers; an error is logged and
  // reported by fill().
  void start();

  // Before the first run (Collector::prepare_mad): the responder's service is declared now, so
  // that the engine registers its agent in the same call that opens the port, before a peer's
  // probe can arrive.
  bool prepare_mad();

  // Whether this collector uses MAD at all (and so needs the local ports listed).
  bool uses_mad() const;

  // MAD work of one collection: the responder's registration and the SA lookup of targets.
  // `ports`: the local InfiniBand ports as just listed (off the loop), nullopt when that failed
  // (`error`); then nothing is done over MAD in this collection.
  void refresh_mad(const std::optional<std::vector<mad::LocalPort>>& ports,
                   const std::string& error);

  // This node as its probes are named (ibfabric_probe_node_info): the CA of the port the
  // engine probes from, named as every node is (node-name-map, NodeDescription, GUID), so that
  // alerts name a prober as they name its peers. Its NodeDescription is asked once per CA.
  void identify(const std::vector<mad::LocalPort>& ports);

  // The labels of ibfabric_probe_node_info, once the name is known (so that the series does
  // not change name a collection after start): without an InfiniBand port (UDP probes only),
  // the host name.
  std::optional<Labels> node_labels() const;

  // A new rotation slot (rotate_every) draws the next subset of peers.
  void rotate();

  // The probe plan's last answer (plan_url): the planned peers' node GUIDs. Public for tests.
  void set_plan(std::vector<std::uint64_t> plan);

  // Serves ibping's class on the default port, or says why not. The engine resolves and opens
  // the port off the loop and registers the service as soon as it is open, without waiting for
  // a later call; "" while that is under way.
  std::string serve_mad();

  void declare_service(const std::shared_ptr<mad::Engine>& engine);

  void stop();

  // The collection's metrics, and its failure with every problem seen since the last one.
  void fill(MetricsBuilder& out, CollectResult& result);

 private:
  using udp = boost::asio::ip::udp;
  // Socket receive timestamps are CLOCK_REALTIME (there is no monotonic choice), so probe times
  // are taken on that clock too; a sample across a clock step is dropped (negative or > 10 s).
  using Clock = std::chrono::system_clock;
  static constexpr std::size_t kMaxDatagram = 9000;

  struct Peer {
    Peer(std::string n, bool m, SpikeRule rule, std::size_t window, boost::asio::io_context& io)
        : name(std::move(n)), mad(m), stats(rule, window), timer(io) {}
    std::string name;
    bool mad = false;
    udp::endpoint endpoint;  // UDP
    std::uint16_t lid = 0;   // MAD: where probes go; UDP: the peer's IB port, if known
    PeerStats stats;
    boost::asio::steady_timer timer;
    std::uint32_t next_sequence = 1;
    std::map<std::uint32_t, Clock::time_point> pending;  // UDP: sequence -> sent at
    bool scheduled = false;
    // MAD probes that failed here, not in the network: the port broke under them, or the
    // answer carried a MAD status. Neither sent nor lost: evidence about this host.
    std::uint64_t port_errors = 0, mad_statuses = 0;
  };
  using PeerPtr = std::shared_ptr<Peer>;

  // A peer as the targets and the latest SA lookup define it.
  struct Wanted {
    TargetConfig target;
    bool mad = false;
    udp::endpoint endpoint;
    std::uint16_t lid = 0;
  };

  // The peers to probe now: UDP targets, MAD targets with a known LID, discovered CA ports;
  // the Pingmesh subset of them; existing peers keep their statistics.
  void update_peers();

  // Never more than max_probes_per_second in all: stretch every peer's interval if needed.
  void schedule_all();

  // SA lookups of the MAD targets named by GUID or node description (a NodeRecord query
  // each, with a component mask, so the answer is a record or two) and, with `discover`, of
  // the whole NodeRecord table. The peers change only when every lookup has answered.
  void resolve();

  struct ResolveRound {
    std::size_t waiting = 0;
    std::vector<NodeRecord> records;
    std::string error;
  };

  void resolved(ResolveRound& round);

  void open_responder();
  void respond();
  void schedule(const PeerPtr& peer, std::chrono::nanoseconds after);
  void send_udp(Peer& peer);
  void send_mad(const PeerPtr& peer);
  void record(Peer& peer, std::chrono::nanoseconds rtt,
              std::optional<std::chrono::nanoseconds> network);
  void receive();
  void on_reply(Clock::time_point now, std::size_t n);

  // UDP probes older than the timeout are lost (the engine times MAD probes out itself);
  // checked a few times per timeout.
  void arm_sweep();

  boost::asio::io_context& io_;
  ProbeConfig config_;
  mad::ClientHandle mad_;
  std::shared_ptr<const NodeNameMap> node_names_;  // names of discovered peers
  std::shared_ptr<PeerDirectory> directory_;       // what the paths collector traces (or null)
  udp::socket socket_;                             // the prober's
  udp::socket responder_;                          // the responder's
  boost::asio::steady_timer sweep_;
  std::vector<PeerPtr> peers_;
  std::vector<std::string> errors_;      // of the latest peer update
  std::set<std::string> unresolved_;     // MAD targets the SA does not know, by name
  std::vector<std::string> mad_errors_;  // of the latest collection
  std::set<std::string> send_errors_;    // MAD probes not sent since the latest collection
  std::string responder_error_;
  std::string sa_error_;
  std::unique_ptr<mad::Service> service_;
  std::weak_ptr<mad::Engine> service_engine_;
  std::vector<NodeRecord> records_;         // the SA's, latest lookup
  std::set<std::uint64_t> own_port_guids_;  // of the local InfiniBand ports, latest listing
  std::uint64_t node_guid_ = 0;             // of the CA probes leave from; 0: not known yet
  std::optional<std::string> node_description_;
  bool describing_ = false;
  bool has_infiniband_ = true;  // until a listing finds no InfiniBand port
  bool needs_sa_ = false;
  bool resolving_ = false;
  bool resolved_once_ = false;
  std::chrono::steady_clock::time_point resolve_at_{};
  std::array<std::uint8_t, kMaxDatagram> buffer_{}, responder_buffer_{};
  udp::endpoint from_, responder_peer_;
  std::uint64_t token_ = 0;
  std::uint64_t responder_requests_ = 0;
  std::chrono::nanoseconds interval_{0};
  std::uint64_t slot_ = 0;  // the rotation slot of the current peers
  WallClock wall_clock_;
  bool started_ = false;
  // The probe plan (plan_url): its client, the next ask, the peers it gave, whether the last
  // ask answered (and what failed), the planned peers among this collection's.
  void ask_plan();
  std::unique_ptr<PlanClient> plan_client_;
  boost::asio::steady_timer plan_timer_;
  std::vector<std::uint64_t> plan_;
  std::optional<bool> plan_up_;
  std::string plan_error_;
  std::size_t planned_ = 0;
};

}  // namespace ibfabric::probe
