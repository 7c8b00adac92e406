// The local CA ports, as libibumad reads them from sysfs (no MAD is sent).
#include "collectors/mad/engine_impl.h"

namespace ibfabric::mad {

namespace detail {
namespace {

std::once_flag umad_init_once;
bool umad_ready = false;

}  // namespace

bool init_umad() {
  std::call_once(umad_init_once, [] {
    umad_ready = umad_init() >= 0;
    if (!umad_ready) {
      spdlog::warn("mad: umad_init failed, no MAD can be sent");
      return;
    }
    // The simulator's shim (libumad2sim) sets itself up on the first sysfs or umad device
    // access, unlocked: two threads doing their first access at once (a port listing on its
    // worker, the engine opening a port on the loop) both connect to ibsim, and the second
    // dies ("can't bind ctl socket"). So make the first access here, where every user of
    // libibumad passes first and call_once holds the others back. On a host it is one more
    // listing of /sys/class/infiniband.
    char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
    umad_get_cas_names(names, UMAD_MAX_DEVICES);
  });
  return umad_ready;
}

}  // namespace detail

using detail::init_umad;

std::vector<LocalPort> list_local_ports() {
  std::vector<LocalPort> out;
  if (!init_umad()) return out;
  char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
  int n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
  for (int i = 0; i < n; ++i) {
    umad_ca_t ca{};
    if (umad_get_ca(names[i], &ca) < 0) continue;
    for (int p = 1; p < UMAD_CA_MAX_PORTS && p <= ca.numports; ++p) {
      const umad_port_t* up = ca.ports[p];
      if (!up) continue;
      LocalPort lp;
      lp.ca = ca.ca_name;
      lp.port = up->portnum;
      lp.lid = static_cast<std::uint16_t>(up->base_lid);
      lp.sm_lid = static_cast<std::uint16_t>(up->sm_lid);
      lp.lmc = static_cast<int>(up->lmc);
      lp.state = static_cast<int>(up->state);
      lp.phys_state = static_cast<int>(up->phys_state);
      lp.port_guid = be64toh(up->port_guid);
      lp.node_guid = be64toh(ca.node_guid);
      lp.link_layer = up->link_layer;
      out.push_back(std::move(lp));
    }
    umad_release_ca(&ca);
  }
  std::sort(out.begin(), out.end(), [](const LocalPort& a, const LocalPort& b) {
    return std::tie(a.ca, a.port) < std::tie(b.ca, b.port);
  });
  return out;
}

std::vector<LocalPort> list_infiniband_ports(const std::set<std::string>& only) {
  std::vector<LocalPort> ports;
  for (auto& port : list_local_ports()) {
    if (port.link_layer == "Ethernet") continue;
    if (!only.empty() && !only.count(port.ca)) continue;
    ports.push_back(std::move(port));
  }
  return ports;
}

}  // namespace ibfabric::mad
