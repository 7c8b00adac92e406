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
// LID), and every PMA Get with zeroed counters; a route that leads nowhere times out. Each
// answer is posted to the loop, never run inside submit() (the engine's contract).
class FakeFabric final : public mad::Engine {
 public:
  struct Node {
    std::uint64_t guid = 0;
    int type = IB_NODE_CA;
    int ports = 1;
    std::string description;
    std::uint16_t lid = 0;
  };

  // `local`: the node the daemon runs on (directed routes start at its port 1).
  FakeFabric(boost::asio::io_context& io, std::uint64_t local)
      : Engine(mad::EngineConfig{}), io_(io), local_(local) {}

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

  void submit(mad::Request request, mad::Callback callback) override {
    // Lost, to a stopped node, or answered; counted in flight until the answer is delivered
    // (the block "Switch PMAs, lossy ports, ..." below).
    auto r = reaches_stopped(request) || lose_now(request) ? lost() : answer(request);
    auto destination = sent(request);
    boost::asio::post(io_, [this, destination, r = std::move(r), callback = std::move(callback)] {
      delivered(destination);
      callback(r);
    });
  }
  std::unique_ptr<mad::Service> serve(mad::PortAddress, std::uint8_t, std::uint32_t, double,
                                      mad::RequestHandler) override {
    return nullptr;
  }
  std::unique_ptr<mad::Client> client() override { return std::make_unique<Forward>(*this); }
  std::optional<mad::PortAddress> default_port() override { return mad::PortAddress{"mlx5_0", 1}; }
  void open_default_port(std::function<void(std::string)> done) override {
    boost::asio::post(io_, [done = std::move(done)] { done(""); });
  }
  void fill_metrics(MetricsBuilder&) const override {}

  // ---- Switch PMAs, lossy ports, a node that stops answering, and the requests in flight per
  // destination (added for the fabric collector's tests, tests/unit/fabric_*_test.cpp). ----

  // What the PMA of `guid` answers ClassPortInfo with. Unset: zeros (no PortCountersExtended).
  void set_pma_capabilities(std::uint64_t guid, std::uint16_t mask, std::uint32_t mask2 = 0) {
    pma_capabilities_[guid] = {mask, mask2};
  }
  // Field `field` of PMA attribute `attribute` (IB_GSI_PORT_COUNTERS, _COUNTERS_EXT,
  // _RCV_ERROR_DETAILS, _XMIT_DISCARD_DETAILS) of port `port` of `guid`: what a Get of that
  // attribute whose PortSelect is `port` answers. Set with libibmad; unset fields are 0.
  void set_counter(std::uint64_t guid, int port, std::uint16_t attribute, enum MAD_FIELDS field,
                   std::uint32_t value) {
    mad_set_field(pma_data(guid, port, attribute), 0, field, value);
  }
  void set_counter64(std::uint64_t guid, int port, std::uint16_t attribute, enum MAD_FIELDS field,
                     std::uint64_t value) {
    mad_set_field64(pma_data(guid, port, attribute), 0, field, value);
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
  // Forgets the requests and peaks seen so far (not what is in flight).
  void clear_requests() {
    requests_.clear();
    peak_in_flight_.clear();
    peak_destinations_ = 0;
  }

 private:
  using End = std::pair<std::uint64_t, int>;

  struct Loss {
    int percent = 0;
    int seen = 0;  // requests it applied to so far
  };

  std::uint8_t* pma_data(std::uint64_t guid, int port, std::uint16_t attribute) {
    auto& data = pma_data_[{guid, port, attribute}];
    data.resize(IB_PC_DATA_SZ, 0);
    return data.data();
  }

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
    if (n++ == 0) ++destinations_in_flight_;
    peak_in_flight_[destination] = std::max(peak_in_flight_[destination], n);
    peak_destinations_ = std::max(peak_destinations_, destinations_in_flight_);
    return destination;
  }
  void delivered(const std::string& destination) {
    if (--in_flight_[destination] == 0) --destinations_in_flight_;
  }

  // A PMA's answer: ClassPortInfo's capability masks, else the attribute of the selected port
  // as set (zeros when not), PortSelect echoed.
  void answer_pma(const mad::Request& q, const Node& node, mad::Response& r) const {
    auto* data = r.mad.data() + 64;
    if (pma_rejects_.count({node.guid, q.attr_id})) {
      r.status = mad::Status::mad_status;
      r.mad_status = 0x0c;  // unsupported attribute
      r.error = "unsupported attribute";
      return;
    }
    if (q.attr_id == CLASS_PORT_INFO) {
      if (auto it = pma_capabilities_.find(node.guid); it != pma_capabilities_.end()) {
        mad_set_field(data, 0, IB_CPI_CAPMASK_F, it->second.first);
        mad_set_field(data, 0, IB_CPI_CAPMASK2_F, it->second.second);
      }
      return;
    }
    int port = port_of(q);
    if (auto it = pma_data_.find({node.guid, port, q.attr_id}); it != pma_data_.end()) {
      std::copy(it->second.begin(), it->second.end(), data);
    }
    mad_set_field(data, 0, IB_PC_PORT_SELECT_F, static_cast<std::uint32_t>(port));
  }

  std::map<std::uint64_t, std::pair<std::uint16_t, std::uint32_t>> pma_capabilities_;
  std::map<std::tuple<std::uint64_t, int, std::uint16_t>, std::vector<std::uint8_t>> pma_data_;
  std::set<std::pair<std::uint64_t, std::uint16_t>> pma_rejects_;
  std::map<std::tuple<std::uint64_t, std::optional<int>, std::optional<Attribute>>, Loss> losses_;
  std::set<std::uint64_t> stopped_;
  std::vector<Sent> requests_;
  std::map<std::string, int> in_flight_, peak_in_flight_;
  int destinations_in_flight_ = 0, peak_destinations_ = 0;

  // ---- End of the fabric collector's block. ----

  class Forward final : public mad::Client {
   public:
    explicit Forward(FakeFabric& fabric) : fabric_(fabric) {}
    void submit(mad::Request request, mad::Callback callback) override {
      fabric_.submit(std::move(request), std::move(callback));
    }

   private:
    FakeFabric& fabric_;
  };

  mad::Response answer(const mad::Request& q) const {
    mad::Response r;
    r.attempts = 1;
    // The node the request reaches, and the port it entered that node by.
    const Node* node = nullptr;
    int entered = 0;
    if (q.to.directed) {
      End at{local_, 1};
      for (auto out : q.to.path) {
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
    r.status = mad::Status::ok;
    r.mad.assign(IB_MAD_SIZE, 0);
    r.mad[1] = q.mgmt_class;
    auto* data = r.mad.data() + 64;  // SMP and PMA attribute data
    if (q.mgmt_class == mad::kPerfMgt) {
      answer_pma(q, *node, r);
      return r;
    }
    switch (q.attr_id) {
      case IB_ATTR_NODE_INFO:
        mad_set_field64(data, 0, IB_NODE_GUID_F, node->guid);
        mad_set_field64(data, 0, IB_NODE_PORT_GUID_F, node->guid + 1);
        mad_set_field(data, 0, IB_NODE_TYPE_F, static_cast<std::uint32_t>(node->type));
        mad_set_field(data, 0, IB_NODE_NPORTS_F, static_cast<std::uint32_t>(node->ports));
        mad_set_field(data, 0, IB_NODE_LOCAL_PORT_F, static_cast<std::uint32_t>(entered));
        break;
      case IB_ATTR_NODE_DESC: {
        char text[IB_SMP_DATA_SIZE] = {};
        node->description.copy(text, sizeof text);
        mad_set_array(data, 0, IB_NODE_DESC_F, text);
        break;
      }
      case IB_ATTR_PORT_INFO: {
        int port = static_cast<int>(q.attr_mod);
        bool up = port == 0 || cables_.count({node->guid, port});
        mad_set_field64(data, 0, IB_PORT_GID_PREFIX_F, kSubnetPrefix);
        mad_set_field(data, 0, IB_PORT_LID_F, node->lid);
        mad_set_field(data, 0, IB_PORT_LOCAL_PORT_F, static_cast<std::uint32_t>(port));
        mad_set_field(data, 0, IB_PORT_STATE_F, up ? 4 : 1);       // Active / Down
        mad_set_field(data, 0, IB_PORT_PHYS_STATE_F, up ? 5 : 2);  // LinkUp / Polling
        break;
      }
      default:
        r.status = mad::Status::mad_status;
        r.mad_status = 0x0c;  // unsupported attribute
        r.error = "unsupported attribute";
    }
    return r;
  }

  boost::asio::io_context& io_;
  std::uint64_t local_;
  std::map<std::uint64_t, Node> nodes_;
  std::map<End, End> cables_;
};

}  // namespace ibfabric::test_support
