// A minimal pipelined PMA client, the benchmark's yardstick for the daemon's MAD engine: it only
// sends PerfMgt Get(PortCountersExtended) with up to --in-flight outstanding, from one thread,
// straight on libibumad. No rate limit, no per-destination cap, no retries.
//
//   fabric_mad_client --targets FILE --count N [--in-flight 64] [--timeout-ms 1000]
//
// FILE has one "LID PORT" per line; the client cycles through it until N MADs were answered or
// lost. Prints one line: mads=N ok=N lost=N seconds=S mads_per_second=R.

#include <infiniband/umad.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMadSize = 256;
constexpr std::uint8_t kPerfMgtClass = 0x04;
constexpr std::uint16_t kAttrPortCountersExtended = 0x001d;
constexpr std::uint32_t kQp1Qkey = 0x80010000;

void put16(std::uint8_t* p, std::uint16_t v) {
  v = htons(v);
  std::memcpy(p, &v, 2);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}

// The common MAD header (IBA 13.4.3) and the PMA's PortSelect, which sits at octet 1 of the
// data area (octet 64 of the MAD, after the 40 reserved octets of the PMA header).
void encode(std::uint8_t* mad, std::uint32_t tid, int port) {
  std::memset(mad, 0, kMadSize);
  mad[0] = 1;  // BaseVersion
  mad[1] = kPerfMgtClass;
  mad[2] = 1;            // ClassVersion
  mad[3] = 0x01;         // Get
  put32(mad + 12, tid);  // lower half of the 64-bit TransactionID
  put16(mad + 16, kAttrPortCountersExtended);
  mad[65] = static_cast<std::uint8_t>(port);
  put16(mad + 66, 0xffff);  // CounterSelect
}

}  // namespace

int main(int argc, char** argv) {
  std::string targets_path;
  long count = 0;
  int in_flight = 64;
  int timeout_ms = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--targets") {
      targets_path = argv[i + 1];
    } else if (a == "--count") {
      count = std::atol(argv[i + 1]);
    } else if (a == "--in-flight") {
      in_flight = std::atoi(argv[i + 1]);
    } else if (a == "--timeout-ms") {
      timeout_ms = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::pair<int, int>> targets;
  std::ifstream in(targets_path);
  int lid = 0;
  int port = 0;
  while (in >> lid >> port) targets.emplace_back(lid, port);
  if (targets.empty() || count <= 0 || in_flight <= 0) {
    std::fprintf(stderr,
                 "usage: fabric_mad_client --targets FILE --count N [--in-flight 64] "
                 "[--timeout-ms 1000]\n");
    return 2;
  }
  if (umad_init() < 0) {
    std::fprintf(stderr, "umad_init failed\n");
    return 1;
  }
  int portid = umad_open_port(nullptr, 0);
  if (portid < 0) {
    std::fprintf(stderr, "umad_open_port failed: %d\n", portid);
    return 1;
  }
  int agent = umad_register(portid, kPerfMgtClass, 1, 0, nullptr);
  if (agent < 0) {
    std::fprintf(stderr, "umad_register failed: %d\n", agent);
    return 1;
  }

  // One thread: fill the window, then each answer frees a slot for the next Get. No handoff
  // between threads on the way from an answer to the next send.
  std::unordered_map<std::uint32_t, Clock::time_point> outstanding;
  std::vector<std::uint8_t> umad(umad_size() + kMadSize);
  std::vector<std::uint8_t> buf(umad_size() + kMadSize);
  long sent = 0;
  long ok = 0;
  long bad = 0;
  long lost = 0;
  std::uint32_t tid = 1;
  auto start = Clock::now();
  auto timeout = std::chrono::milliseconds(timeout_ms);
  while (sent < count || !outstanding.empty()) {
    while (sent < count && static_cast<int>(outstanding.size()) < in_flight) {
      const auto& [dlid, dport] = targets[static_cast<std::size_t>(sent) % targets.size()];
      std::uint32_t t = tid++;
      encode(static_cast<std::uint8_t*>(umad_get_mad(umad.data())), t, dport);
      umad_set_addr(umad.data(), dlid, 1, 0, kQp1Qkey);
      if (umad_send(portid, agent, umad.data(), kMadSize, timeout_ms, 0) < 0) {
        ++lost;
      } else {
        outstanding.emplace(t, Clock::now());
      }
      ++sent;
    }
    int len = kMadSize;
    if (umad_recv(portid, buf.data(), &len, 100) >= 0) {
      auto* mad = static_cast<std::uint8_t*>(umad_get_mad(buf.data()));
      std::uint16_t status = static_cast<std::uint16_t>((mad[4] << 8) | mad[5]);
      if (outstanding.erase(get32(mad + 12))) {
        (umad_status(buf.data()) == 0 && status == 0 ? ok : bad)++;
      }
      continue;
    }
    // Nothing arrived for 100 ms: what is past its timeout is lost, its slot free again.
    auto now = Clock::now();
    std::erase_if(outstanding, [&](const auto& entry) {
      bool expired = now - entry.second > timeout;
      lost += expired;
      return expired;
    });
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  umad_unregister(portid, agent);
  umad_close_port(portid);
  std::printf("mads=%ld ok=%ld bad_status=%ld lost=%ld seconds=%.6f mads_per_second=%.1f\n", sent,
              ok, bad, lost, seconds, seconds > 0 ? static_cast<double>(sent) / seconds : 0.0);
  return ok > 0 ? 0 : 1;
}
