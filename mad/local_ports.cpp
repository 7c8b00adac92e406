// The local CA ports, as libibumad reads them from sysfs (no MAD is sent).
#include "mad/engine_impl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

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

namespace {
std::mutex issm_mutex;
bool issm_held_back = false;  // by take_simulator_issm(), before any thread
int issm_fd = -1;
}  // namespace

void mark_simulator_issm(const PortAddress& addr) {
  std::lock_guard lock(issm_mutex);
  if (!issm_held_back || issm_fd >= 0) return;
  char path[256];
  int rc = umad_get_issm_path(addr.ca.c_str(), addr.port, path, sizeof path);
  issm_fd = rc < 0 ? rc : ::open(path, O_RDWR);
  if (issm_fd < 0) {
    issm_held_back = false;
    spdlog::warn("mad: cannot mark ca={} port={} IsSM (SIM_SET_ISSM): {}", addr.ca, addr.port,
                 errno_text(rc < 0 ? rc : errno));
    return;
  }
  spdlog::info("mad: marked ca={} port={} IsSM (SIM_SET_ISSM) once its agents were registered",
               addr.ca, addr.port);
}

void unmark_simulator_issm() {
  std::lock_guard lock(issm_mutex);
  if (issm_fd < 0) return;
  ::close(issm_fd);
  issm_fd = -1;
  issm_held_back = false;
}

}  // namespace detail

void take_simulator_issm() {
  const char* preload = std::getenv("LD_PRELOAD");
  // The shim sets IsSM for any value of the variable, so any value is taken.
  if (std::getenv("SIM_SET_ISSM") == nullptr || preload == nullptr ||
      std::strstr(preload, "umad2sim") == nullptr) {
    return;
  }
  ::unsetenv("SIM_SET_ISSM");
  detail::issm_held_back = true;
}

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
