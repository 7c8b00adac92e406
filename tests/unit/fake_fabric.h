#pragma once
// The fake MAD engine of the unit tests that drive a collector's run logic: a subnet as the
// engine sees it (the edge the collectors talk to), answering as a subnet does. Nothing of
// ours is mocked: the collectors send their real requests and decode real answers.

#include "mad/engine.h"

#include <infiniband/mad.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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
    boost::asio::post(io_, [r = answer(request), callback = std::move(callback)] { callback(r); });
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

 private:
  using End = std::pair<std::uint64_t, int>;

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
    if (q.mgmt_class == mad::kPerfMgt) return r;
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
