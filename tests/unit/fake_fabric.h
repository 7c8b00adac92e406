#pragma once
// The fake MAD engine of the unit tests that drive a collector's run logic: a subnet as the
// engine sees it (the edge the collectors talk to), answering as a subnet does. Nothing of
// ours is mocked: the collectors send their real requests and decode real answers.

#include "mad/engine.h"

#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ibfabric::test_support {

inline constexpr std::uint64_t kSubnetPrefix = 0xfe80000000000000ull;

// A subnet as the MAD engine sees it: nodes, cables between their ports, LIDs. Answers
// NodeInfo, NodeDescription and PortInfo by directed route from the daemon's node (or by
// LID), and every PMA Get with zeroed counters; a route that leads nowhere times out. Also
// (the additions for the paths, ports, sm and fabric run tests, below) switches' forwarding
// tables, SMs and their SA table, PMA counters set per port, PMAs that reject an attribute,
// lossy ports, nodes that answer nothing or forward nothing, and the requests in flight. Each
// answer is posted to the loop, never run inside submit() (the engine's contract).
//
// Held: a test that must choose when and how each request is answered (a probe's round trip,
// the order of a fan-out's answers) builds it `Held` and answers `held` itself; the engine's other
// edges are then the test's too: the services a responder declares (`served`), the default
// port (`port`) and the opening of it (`opens`, called when the test says).
class FakeFabric final : public mad::Engine {
 public:
  struct Node {
    std::uint64_t guid = 0;
    int type = IB_NODE_CA;
    int ports = 1;
    std::string description;
    std::uint16_t lid = 0;
    std::uint32_t vendor_id = 0x0002c9;  // NodeInfo VendorID, DeviceID
    std::uint32_t device_id = 0;
  };

  // `local`: the node the daemon runs on (directed routes start at its port 1).
  FakeFabric(boost::asio::io_context& io, std::uint64_t local)
      : Engine(mad::EngineConfig{}), io_(io), local_(local) {}
  // A held engine (above): no subnet behind it, the test answers.
  struct Held {};
  FakeFabric(boost::asio::io_context& io, Held)
      : Engine(mad::EngineConfig{}), hold(true), port(std::nullopt), io_(io), local_(0) {}

  void add(Node node) { nodes_[node.guid] = std::move(node); }
  void cable(std::uint64_t a, int a_port, std::uint64_t b, int b_port) {
    cables_[{a, a_port}] = {b, b_port};
    cables_[{b, b_port}] = {a, a_port};
  }
  void unplug(std::uint64_t guid, int port) {
    auto it = cables_.find({guid, port});
    if (it == cables_.end()) return;
    cables_.erase(it->second);
    cables_.erase(it);
  }

  // --- For the paths, ports and sm run tests: what those collectors read besides the above.
  // Each models a part of a subnet the way its agents answer; the tests set it as an SM (or a
  // fault) would leave it.

  // The switch's LinearForwardingTable (SMP 0x19, 64 LIDs a block, the block number in the
  // attribute modifier): `lid` leaves by `port` (0: the switch itself; 0xff, the default of
  // every entry: no route).
  void forward(std::uint64_t switch_guid, std::uint16_t lid, int port) {
    auto& block = lft_[{switch_guid, lid / 64u}];
    if (block.empty()) block.assign(64, 0xff);
    block[lid % 64] = static_cast<std::uint8_t>(port);
  }
  // The LMC of a node's port (PortInfo.LMC): it owns LIDs lid .. lid + 2^lmc - 1.
  void lmc(std::uint64_t guid, int lmc) { lmc_[guid] = lmc; }
  // PortInfo.CapabilityMask of a node's ports (of a switch, its port 0 only; 0 by default).
  void capability_mask(std::uint64_t guid, std::uint32_t mask) { capability_mask_[guid] = mask; }

  // A Subnet Manager running on a node: it answers SMInfo there (GUID: its port GUID), and,
  // in state master, the SA's SMInfoRecord table of every SM running. `answers` false: it is
  // stopped (SIGSTOP) and answers nothing, though the SA may still list it.
  struct Sm {
    std::uint64_t guid = 0;
    std::uint32_t activity = 0;  // ActCount
    int priority = 0;
    int state = 3;  // SMInfo.SMState: 3 master, 2 standby
    bool answers = true;
  };
  void run_sm(std::uint64_t node, Sm sm) { sms_[node] = sm; }
  Sm& sm(std::uint64_t node) { return sms_.at(node); }
  void stop_sm(std::uint64_t node) { sms_.erase(node); }
  // PortInfo.MasterSMLID of every port, as the master SM programs it (0: no SM yet).
  void master_sm_lid(std::uint16_t lid) { master_sm_lid_ = lid; }

  // The node's PMA: ClassPortInfo's CapabilityMask and CapabilityMask2 (0 by default: no
  // PortCountersExtended), and any field of a PMA attribute (PortCounters,
  // PortCountersExtended, PortRcvErrorDetails, ...) of one port (its PortSelect); every other
  // field reads 0.
  void pma_capabilities(std::uint64_t guid, std::uint16_t mask, std::uint32_t mask2 = 0) {
    pma_caps_[guid] = {mask, mask2};
  }
  void pma_counter(std::uint64_t guid, int port, std::uint16_t attribute, enum MAD_FIELDS field,
                   std::uint64_t value) {
    pma_[{guid, port, attribute}][field] = value;
  }

  // A node that answers nothing any more (hung, or every MAD to it lost): each request that
  // reaches it times out.
  void silence(std::uint64_t guid, bool silent = true) {
    if (silent) {
      silent_.insert(guid);
    } else {
      silent_.erase(guid);
    }
  }

  // The requests that reached a node (answered or not), as its agents saw them.
  struct Asked {
    std::uint64_t node = 0;
    std::uint8_t mgmt_class = 0;
    std::uint16_t attr_id = 0;
    std::uint32_t attr_mod = 0;
  };
  std::vector<Asked> asked;
  // How many of them asked `attr_id` (of any class), of `node` when it is not 0.
  std::size_t count_asked(std::uint16_t attr_id, std::uint64_t node = 0) const {
    std::size_t n = 0;
    for (const auto& a : asked) n += a.attr_id == attr_id && (node == 0 || a.node == node);
    return n;
  }
  // --- end of the additions for the paths, ports and sm run tests.

  void submit(mad::Request request, mad::Callback callback) override {
    if (hold) {
      held.push_back({std::move(request), std::move(callback)});
      return;
    }
    // Lost, to a stopped node, or answered; counted in flight until the answer is delivered
    // (the block "PMAs that reject, lossy ports, ..." below).
    auto r = reaches_stopped(request) || lose_now(request) ? lost() : answer(request);
    auto destination = sent(request);
    if (sa_tables_last && request.mgmt_class == mad::kSubnAdm &&
        request.method == IB_MAD_METHOD_GET_TABLE) {
      last_.push_back({destination, std::move(r), std::move(callback)});
      // Not before the handler that asked returns: it may go on to ask more.
      boost::asio::post(io_, [this] { answer_last_if_alone(); });
      return;
    }
    boost::asio::post(io_, [this, destination, r = std::move(r), callback = std::move(callback)] {
      delivered(destination);
      callback(r);
      answer_last_if_alone();
    });
  }
  // An SA slower than every switch: its tables are answered only once nothing else is in
  // flight. How many requests had been sent when they were, and the most LID destinations
  // with requests in flight at once until then.
  bool sa_tables_last = false;
  std::size_t requests_before_tables = 0;
  int peak_lid_destinations_before_tables = 0;
  std::unique_ptr<mad::Service> serve(mad::PortAddress via, std::uint8_t mgmt_class,
                                      std::uint32_t oui, double max_per_second,
                                      mad::RequestHandler handler) override {
    served.push_back({via, mgmt_class, oui, max_per_second, std::move(handler)});
    return std::make_unique<HeldService>(*this);
  }
  std::unique_ptr<mad::Client> client() override { return std::make_unique<Forward>(*this); }
  std::optional<mad::PortAddress> default_port() override { return port; }
  void open_default_port(std::function<void(std::string)> done) override {
    if (hold) {
      opens.push_back(std::move(done));
      return;
    }
    boost::asio::post(io_, [done = std::move(done)] { done(""); });
  }
  void fill_metrics(MetricsBuilder&) const override {}

  // --- Held (above).
  bool hold = false;
  struct HeldRequest {
    mad::Request request;
    mad::Callback callback;
  };
  std::deque<HeldRequest> held;
  // Answers the oldest held request, now: a full MAD of its class whose attribute data is
  // `fill`, or the failure `status`.
  void answer_held(mad::Status status = mad::Status::ok, std::uint8_t fill = 0) {
    auto h = std::move(held.front());
    held.pop_front();
    mad::Response r;
    r.status = status;
    if (status == mad::Status::ok) {
      r.mad.assign(IB_MAD_SIZE, fill);
      r.mad[1] = h.request.mgmt_class;
    }
    h.callback(std::move(r));
  }
  // Services (Engine::serve), in the order declared: what a responder would answer with.
  struct Served {
    mad::PortAddress via;
    std::uint8_t mgmt_class = 0;
    std::uint32_t oui = 0;
    double max_per_second = 0;
    mad::RequestHandler handler;
  };
  std::vector<Served> served;
  std::string serve_error;                  // what every Service::refresh() says ("" = serving)
  int refreshes = 0;                        // Service::refresh() calls
  std::uint64_t answered = 0, dropped = 0;  // what every Service reports
  std::optional<mad::PortAddress> port = mad::PortAddress{"mlx5_0", 1};  // default_port()
  std::vector<std::function<void(std::string)>> opens;  // held: open_default_port() calls
  // --- end of held.

  // ---- PMAs that reject an attribute, lossy ports, a node that stops answering, and the
  // requests in flight per destination (added for the fabric collector's tests,
  // tests/unit/fabric_*_test.cpp; its PMA counters are set with pma_counter() above). ----

  // PortInfo.OperationalVLs of the node's ports, or of port `port` only (1 VL0, 2 VL0-1, 3 VL0-3,
  // 4 VL0-7, 5 VL0-14; 0, the default: not set).
  void oper_vls(std::uint64_t guid, int value, std::optional<int> port = std::nullopt) {
    oper_vls_[{guid, port}] = value;
  }

  // The PMA of `guid` rejects `attribute` (MAD status: unsupported attribute).
  void reject_pma(std::uint64_t guid, std::uint16_t attribute) {
    pma_rejects_.insert({guid, attribute});
  }

  // An attribute as a loss rule names it: SMP and PMA attribute ids overlap (PortInfo and
  // PortRcvErrorDetails are both 0x15).
  struct Attribute {
    bool pma;
    std::uint16_t id;
    auto operator<=>(const Attribute&) const = default;
  };
  static Attribute smp(std::uint16_t id) { return {false, id}; }
  static Attribute pma(std::uint16_t id) { return {true, id}; }

  // `percent` of the requests that reach `guid` get no answer (as if dropped where they enter
  // it): of those about port `port` when given (PortInfo of that port, PMA Gets whose
  // PortSelect is that port), of `attribute` when given. Deterministic: of every 100 such
  // requests, `percent` are lost, spread evenly. 0 ends the loss.
  void lose(std::uint64_t guid, int percent, std::optional<int> port = std::nullopt,
            std::optional<Attribute> attribute = std::nullopt) {
    losses_[{guid, port, attribute}] = Loss{percent, 0};
  }
  // The node stops answering, and forwards nothing by directed route (a dead switch); `false`
  // brings it back.
  void stop(std::uint64_t guid, bool stopped = true) {
    if (stopped) {
      stopped_.insert(guid);
    } else {
      stopped_.erase(guid);
    }
  }

  // A request as it was submitted: where to ("lid 12", "route 0,1,3"), what, about which port
  // (PortInfo's attribute modifier, a PMA Get's PortSelect; 0 otherwise).
  struct Sent {
    std::string destination;
    std::uint8_t mgmt_class;
    std::uint16_t attribute;
    int port;
  };
  const std::vector<Sent>& requests() const { return requests_; }
  // Requests submitted and not answered yet (their answer not delivered), per destination, and
  // the most there were at once: per destination, and how many destinations had any.
  int in_flight(const std::string& destination) const {
    auto it = in_flight_.find(destination);
    return it == in_flight_.end() ? 0 : it->second;
  }
  int peak_in_flight(const std::string& destination) const {
    auto it = peak_in_flight_.find(destination);
    return it == peak_in_flight_.end() ? 0 : it->second;
  }
  int peak_destinations() const { return peak_destinations_; }
  // The most requests there were in flight at once, to any destinations.
  int peak_total_in_flight() const { return peak_total_in_flight_; }
  // The most destinations addressed by LID (a sweep's; a discovery's go by directed route) that
  // had requests in flight at once.
  int peak_lid_destinations() const { return peak_lid_destinations_; }
  // Forgets the requests and peaks seen so far (not what is in flight).
  void clear_requests() {
    requests_.clear();
    peak_in_flight_.clear();
    peak_destinations_ = 0;
    peak_total_in_flight_ = 0;
    peak_lid_destinations_ = 0;
  }

 private:
  using End = std::pair<std::uint64_t, int>;
  struct Loss {
    int percent = 0;
    int seen = 0;  // requests it applied to so far
  };

  static int port_of(const mad::Request& q) {
    if (q.mgmt_class == mad::kPerfMgt) {
      return q.payload.empty()
                 ? 0
                 : static_cast<int>(mad_get_field(const_cast<std::uint8_t*>(q.payload.data()), 0,
                                                  IB_PC_PORT_SELECT_F));
    }
    return q.attr_id == IB_ATTR_PORT_INFO ? static_cast<int>(q.attr_mod) : 0;
  }

  // The nodes a request crosses, the one it reaches last (an empty list: it leads nowhere).
  std::vector<std::uint64_t> path_of(const mad::Request& q) const {
    std::vector<std::uint64_t> nodes;
    if (q.to.directed) {
      End at{local_, 1};
      nodes.push_back(local_);
      for (auto out : q.to.path) {
        auto it = cables_.find({at.first, out});
        if (it == cables_.end()) return {};
        at = it->second;
        nodes.push_back(at.first);
      }
    } else {
      for (const auto& [guid, n] : nodes_) {
        if (n.lid == q.to.lid) nodes = {guid};
      }
    }
    return nodes;
  }

  bool reaches_stopped(const mad::Request& q) const {
    auto nodes = path_of(q);
    // A directed route leaves the daemon's own node; that one is never stopped.
    for (std::size_t i = q.to.directed ? 1 : 0; i < nodes.size(); ++i) {
      if (stopped_.count(nodes[i])) return true;
    }
    return false;
  }

  bool lose_now(const mad::Request& q) {
    auto nodes = path_of(q);
    if (nodes.empty()) return false;
    auto guid = nodes.back();
    int port = port_of(q);
    Attribute attribute{q.mgmt_class == mad::kPerfMgt, q.attr_id};
    using Key = std::tuple<std::uint64_t, std::optional<int>, std::optional<Attribute>>;
    for (const auto& key :
         {Key{guid, port, attribute}, Key{guid, port, std::nullopt},
          Key{guid, std::nullopt, attribute}, Key{guid, std::nullopt, std::nullopt}}) {
      auto it = losses_.find(key);
      if (it == losses_.end() || it->second.percent == 0) continue;
      auto& loss = it->second;
      int n = loss.seen++;
      return (n + 1) * loss.percent / 100 > n * loss.percent / 100;
    }
    return false;
  }

  static mad::Response lost() {
    mad::Response r;
    r.status = mad::Status::timeout;
    r.attempts = 1;
    r.error = "lost";
    return r;
  }

  std::string sent(const mad::Request& q) {
    auto destination = q.to.to_string();
    requests_.push_back({destination, q.mgmt_class, q.attr_id, port_of(q)});
    auto& n = in_flight_[destination];
    if (n++ == 0) {
      ++destinations_in_flight_;
      if (destination.starts_with("lid ")) {
        peak_lid_destinations_ = std::max(peak_lid_destinations_, ++lid_destinations_in_flight_);
      }
    }
    peak_in_flight_[destination] = std::max(peak_in_flight_[destination], n);
    peak_destinations_ = std::max(peak_destinations_, destinations_in_flight_);
    peak_total_in_flight_ = std::max(peak_total_in_flight_, ++total_in_flight_);
    return destination;
  }
  struct Last {
    std::string destination;
    mad::Response response;
    mad::Callback callback;
  };
  std::vector<Last> last_;
  void answer_last_if_alone() {
    if (last_.empty() || static_cast<std::size_t>(total_in_flight_) != last_.size()) return;
    requests_before_tables = requests_.size();
    peak_lid_destinations_before_tables = peak_lid_destinations_;
    for (auto& l : std::exchange(last_, {})) {
      boost::asio::post(io_, [this, l = std::move(l)] {
        delivered(l.destination);
        l.callback(l.response);
      });
    }
  }

  void delivered(const std::string& destination) {
    if (--in_flight_[destination] == 0) {
      --destinations_in_flight_;
      if (destination.starts_with("lid ")) --lid_destinations_in_flight_;
    }
    --total_in_flight_;
  }

  std::set<std::pair<std::uint64_t, std::uint16_t>> pma_rejects_;
  std::map<std::pair<std::uint64_t, std::optional<int>>, int> oper_vls_;
  std::map<std::tuple<std::uint64_t, std::optional<int>, std::optional<Attribute>>, Loss> losses_;
  std::set<std::uint64_t> stopped_;
  std::vector<Sent> requests_;
  std::map<std::string, int> in_flight_, peak_in_flight_;
  int destinations_in_flight_ = 0, peak_destinations_ = 0;
  int total_in_flight_ = 0, peak_total_in_flight_ = 0;
  int lid_destinations_in_flight_ = 0, peak_lid_destinations_ = 0;

  // ---- End of the fabric collector's block. ----

  class HeldService final : public mad::Service {
   public:
    explicit HeldService(FakeFabric& fabric) : fabric_(fabric) {}
    std::string refresh() override {
      ++fabric_.refreshes;
      return fabric_.serve_error;
    }
    std::uint64_t answered() const override { return fabric_.answered; }
    std::uint64_t dropped() const override { return fabric_.dropped; }

   private:
    FakeFabric& fabric_;
  };

  class Forward final : public mad::Client {
   public:
    explicit Forward(FakeFabric& fabric) : fabric_(fabric) {}
    void submit(mad::Request request, mad::Callback callback) override {
      fabric_.submit(std::move(request), std::move(callback));
    }

   private:
    FakeFabric& fabric_;
  };

  mad::Response answer(const mad::Request& q) {
    mad::Response r;
    r.attempts = 1;
    // The node the request reaches, and the port it entered that node by.
    const Node* node = nullptr;
    int entered = 0;
    if (q.to.directed) {
      End at{local_, 1};
      for (auto out : q.to.path) {
        if (at.first != local_ && silent_.count(at.first)) return r;  // it forwards nothing either
        auto it = cables_.find({at.first, out});
        if (it == cables_.end()) {
          r.error = "no cable at " + std::to_string(out);
          return r;  // a timeout, as a route into a down port gives
        }
        at = it->second;
      }
      node = &nodes_.at(at.first);
      entered = at.second;
    } else {
      for (const auto& [guid, n] : nodes_) {
        if (n.lid == q.to.lid) node = &n;
      }
      if (!node) return r;
    }
    asked.push_back({node->guid, q.mgmt_class, q.attr_id, q.attr_mod});
    if (silent_.count(node->guid)) return r;
    r.status = mad::Status::ok;
    r.mad.assign(IB_MAD_SIZE, 0);
    r.mad[1] = q.mgmt_class;
    auto* data = r.mad.data() + 64;  // SMP and PMA attribute data
    if (q.mgmt_class == mad::kPerfMgt) return answer_pma(q, *node, r);
    if (q.mgmt_class == mad::kSubnAdm) return answer_sa(q, *node, r);
    if (answer_smp(q, *node, r)) return r;
    switch (q.attr_id) {
      case IB_ATTR_NODE_INFO:
        mad_set_field64(data, 0, IB_NODE_GUID_F, node->guid);
        mad_set_field64(data, 0, IB_NODE_PORT_GUID_F, node->guid + 1);
        mad_set_field(data, 0, IB_NODE_TYPE_F, static_cast<std::uint32_t>(node->type));
        mad_set_field(data, 0, IB_NODE_NPORTS_F, static_cast<std::uint32_t>(node->ports));
        mad_set_field(data, 0, IB_NODE_LOCAL_PORT_F, static_cast<std::uint32_t>(entered));
        mad_set_field(data, 0, IB_NODE_VENDORID_F, node->vendor_id);
        mad_set_field(data, 0, IB_NODE_DEVID_F, node->device_id);
        break;
      case IB_ATTR_NODE_DESC: {
        char text[IB_SMP_DATA_SIZE] = {};
        node->description.copy(text, sizeof text);
        mad_set_array(data, 0, IB_NODE_DESC_F, text);
        break;
      }
      case IB_ATTR_PORT_INFO:
        port_info(*node, static_cast<int>(q.attr_mod), data);
        break;
      default:
        r.status = mad::Status::mad_status;
        r.mad_status = 0x0c;  // unsupported attribute
        r.error = "unsupported attribute";
    }
    return r;
  }

  // PortInfo of port `port` of `node`, as its SMA answers it (and the SA's record holds it).
  void port_info(const Node& node, int port, std::uint8_t* data) const {
    bool up = port == 0 || cables_.count({node.guid, port});
    mad_set_field64(data, 0, IB_PORT_GID_PREFIX_F, kSubnetPrefix);
    mad_set_field(data, 0, IB_PORT_LID_F, node.lid);
    mad_set_field(data, 0, IB_PORT_LOCAL_PORT_F, static_cast<std::uint32_t>(port));
    mad_set_field(data, 0, IB_PORT_STATE_F, up ? 4 : 1);       // Active / Down
    mad_set_field(data, 0, IB_PORT_PHYS_STATE_F, up ? 5 : 2);  // LinkUp / Polling
    // 4X SDR, up or not: ibsim's SMA answers a down port's last width and speed too.
    mad_set_field(data, 0, IB_PORT_LINK_WIDTH_ACTIVE_F, 2);
    mad_set_field(data, 0, IB_PORT_LINK_SPEED_ACTIVE_F, 1);
    port_info_extras(node, data);
    // A switch's external ports carry no CapabilityMask: its port 0's applies.
    auto mask = capability_mask_.find(node.guid);
    if (mask != capability_mask_.end() && (node.type != IB_NODE_SWITCH || port == 0)) {
      mad_set_field(data, 0, IB_PORT_CAPMASK_F, mask->second);
    }
    for (auto key : {std::pair{node.guid, std::optional<int>{port}},
                     std::pair{node.guid, std::optional<int>{}}}) {
      if (auto it = oper_vls_.find(key); it != oper_vls_.end()) {
        mad_set_field(data, 0, IB_PORT_OPER_VLS_F, static_cast<std::uint32_t>(it->second));
        break;
      }
    }
  }

  // --- Answers for the paths, ports and sm run tests (their state: forward(), run_sm(),
  // pma_counter(), ... above).

  // LinearForwardingTable and SMInfo; false for any other attribute.
  bool answer_smp(const mad::Request& q, const Node& node, mad::Response& r) {
    auto* data = r.mad.data() + 64;
    if (q.attr_id == IB_ATTR_LINEARFORWTBL) {
      if (node.type != IB_NODE_SWITCH) return false;
      std::vector<std::uint8_t> block(64, 0xff);
      if (auto it = lft_.find({node.guid, q.attr_mod}); it != lft_.end()) block = it->second;
      mad_set_array(data, 0, IB_LINEAR_FORW_TBL_F, block.data());
      return true;
    }
    if (q.attr_id == IB_ATTR_SMINFO) {
      auto it = sms_.find(node.guid);
      if (it == sms_.end() || !it->second.answers) {
        r = mad::Response{};  // no SM there to answer: a timeout
        r.error = "no SM answers at this node";
        return true;
      }
      set_sm_info(data, it->second);
      return true;
    }
    return false;
  }

  static void set_sm_info(std::uint8_t* at, const Sm& sm) {
    mad_set_field64(at, 0, IB_SMINFO_GUID_F, sm.guid);
    mad_set_field(at, 0, IB_SMINFO_ACT_F, sm.activity);
    mad_set_field(at, 0, IB_SMINFO_PRIO_F, static_cast<std::uint32_t>(sm.priority));
    mad_set_field(at, 0, IB_SMINFO_STATE_F, static_cast<std::uint32_t>(sm.state));
  }

  void port_info_extras(const Node& node, std::uint8_t* data) const {
    mad_set_field(data, 0, IB_PORT_SMLID_F, master_sm_lid_);
    if (auto it = lmc_.find(node.guid); it != lmc_.end()) {
      mad_set_field(data, 0, IB_PORT_LMC_F, static_cast<std::uint32_t>(it->second));
    }
  }

  // The PMA: ClassPortInfo, and every other attribute with the fields set for its PortSelect.
  mad::Response answer_pma(const mad::Request& q, const Node& node, mad::Response& r) const {
    auto* data = r.mad.data() + 64;
    if (pma_rejects_.count({node.guid, q.attr_id})) {
      r.status = mad::Status::mad_status;
      r.mad_status = 0x0c;  // unsupported attribute
      r.error = "unsupported attribute";
      return r;
    }
    if (q.attr_id == CLASS_PORT_INFO) {
      auto caps = pma_caps_.find(node.guid);
      if (caps != pma_caps_.end()) {
        mad_set_field(data, 0, IB_CPI_CAPMASK_F, caps->second.first);
        mad_set_field(data, 0, IB_CPI_CAPMASK2_F, caps->second.second);
      }
      return r;
    }
    bool extended = q.attr_id == IB_GSI_PORT_COUNTERS_EXT;
    auto select_field = extended ? IB_PC_EXT_PORT_SELECT_F : IB_PC_PORT_SELECT_F;
    std::vector<std::uint8_t> request = q.payload;
    request.resize(IB_PC_DATA_SZ);
    auto port = static_cast<int>(mad_get_field(request.data(), 0, select_field));
    mad_set_field(data, 0, select_field, static_cast<std::uint32_t>(port));
    if (auto it = pma_.find({node.guid, port, q.attr_id}); it != pma_.end()) {
      for (const auto& [field, value] : it->second) {
        if (extended) {
          mad_set_field64(data, 0, field, value);
        } else {
          mad_set_field(data, 0, field, static_cast<std::uint32_t>(value));
        }
      }
    }
    return r;
  }

  // The SA, at the node of the master SM: the SMInfoRecord table (GetTable) of every SM
  // running, and the PortInfoRecord table (below). Elsewhere, or for anything else, no answer.
  mad::Response answer_sa(const mad::Request& q, const Node& node, mad::Response& r) const {
    auto master = sms_.find(node.guid);
    if (master == sms_.end() || !master->second.answers || master->second.state != 3 ||
        q.method != IB_MAD_METHOD_GET_TABLE) {
      return mad::Response{};
    }
    if (q.attr_id == IB_SA_ATTR_PORTINFORECORD) return port_info_records(r);
    if (q.attr_id != IB_SA_ATTR_SMINFORECORD) return mad::Response{};
    // SMInfoRecord: the SM's LID (16 bits; libibmad names no SMInfoRecord field, so it is
    // written as the big-endian word it is), 16 reserved bits, SMInfo; 28 octets padded to 32.
    constexpr std::size_t kRecord = 32;
    mad_set_field(r.mad.data(), 0, IB_SA_ATTROFFS_F, kRecord / 8);
    std::size_t at = IB_SA_DATA_OFFS;
    for (const auto& [guid, sm] : sms_) {
      if (at + kRecord > r.mad.size()) break;
      auto lid = nodes_.at(guid).lid;
      r.mad[at] = static_cast<std::uint8_t>(lid >> 8);
      r.mad[at + 1] = static_cast<std::uint8_t>(lid & 0xff);
      set_sm_info(r.mad.data() + at + 4, sm);
      at += kRecord;
    }
    return r;
  }

  // The PortInfoRecord table: a record per port of every node (a switch's port 0 too), in GUID
  // and port order, each its PortInfo as port_info() answers it but for a port whose link is
  // not up, whose width and speed read 0 (opensm's copy, seen under ibsim); as long as its
  // records (at least one MAD), as the kernel hands over an RMPP-reassembled answer. Cut to the
  // first `port_info_records_cut_` records when set (the simulator's shim carries an RMPP
  // answer's first segment only).
  mad::Response port_info_records(mad::Response& r) const {
    constexpr std::size_t kRecord = 72;  // EndPortLID, PortNum, Options, PortInfo, 4 reserved
    std::vector<std::pair<const Node*, int>> ports;
    for (const auto& [guid, n] : nodes_) {
      for (int p = n.type == IB_NODE_SWITCH ? 0 : 1; p <= n.ports; ++p) ports.emplace_back(&n, p);
    }
    if (port_info_records_cut_ && ports.size() > *port_info_records_cut_) {
      ports.resize(*port_info_records_cut_);
    }
    // At least one MAD, as the engine pads a short SA answer.
    r.mad.assign(std::max<std::size_t>(IB_SA_DATA_OFFS + kRecord * ports.size(), IB_MAD_SIZE), 0);
    r.mad[1] = mad::kSubnAdm;
    mad_set_field(r.mad.data(), 0, IB_SA_ATTROFFS_F, kRecord / 8);
    std::size_t at = IB_SA_DATA_OFFS;
    for (const auto& [n, p] : ports) {
      r.mad[at] = static_cast<std::uint8_t>(n->lid >> 8);
      r.mad[at + 1] = static_cast<std::uint8_t>(n->lid & 0xff);
      r.mad[at + 2] = static_cast<std::uint8_t>(p);
      auto* info = r.mad.data() + at + 4;
      port_info(*n, p, info);
      if (mad_get_field(info, 0, IB_PORT_PHYS_STATE_F) != 5) {
        mad_set_field(info, 0, IB_PORT_LINK_WIDTH_ACTIVE_F, 0);
        mad_set_field(info, 0, IB_PORT_LINK_SPEED_ACTIVE_F, 0);
      }
      at += kRecord;
    }
    ++port_info_record_tables;
    return r;
  }

 public:
  // PortInfoRecord tables the SA answered.
  mutable int port_info_record_tables = 0;
  // The SA's answers of the PortInfoRecord table hold only their first `records` records
  // (nullopt: whole, the default).
  void cut_port_info_records(std::optional<std::size_t> records) {
    port_info_records_cut_ = records;
  }

 private:
  std::optional<std::size_t> port_info_records_cut_;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<std::uint8_t>> lft_;
  std::map<std::uint64_t, int> lmc_;
  std::map<std::uint64_t, std::uint32_t> capability_mask_;
  std::map<std::uint64_t, Sm> sms_;  // by the node they run on
  std::uint16_t master_sm_lid_ = 0;
  std::map<std::uint64_t, std::pair<std::uint16_t, std::uint32_t>> pma_caps_;
  std::map<std::tuple<std::uint64_t, int, std::uint16_t>, std::map<enum MAD_FIELDS, std::uint64_t>>
      pma_;
  std::set<std::uint64_t> silent_;
  // --- end of the answers for the paths, ports and sm run tests.

  boost::asio::io_context& io_;
  std::uint64_t local_;
  std::map<std::uint64_t, Node> nodes_;
  std::map<End, End> cables_;
};

}  // namespace ibfabric::test_support
