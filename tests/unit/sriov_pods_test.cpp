// Which pod holds each VF, and each VF's NUMA node: the sriov collector on the fixture tree
// tests/fixtures/sysfs/sriov-ib (8 VFs at 0000:af:00.1 .. 0000:af:01.0, numa_node 1) asking a
// fake kubelet. The fake is a real gRPC server of the v1 pod-resources proto
// (kubelet/pod_resources.proto) on a Unix socket in a scratch directory; the
// failure cases are sockets that refuse, hang, speak something else, or answer bytes that are
// not the response message.

#include "collectors/sriov/sriov_collector.h"
#include "collectors/sriov/sriov_sysfs.h"
#include "kubelet/pod_resources.h"

#include "tests/unit/collector_test_support.h"
#include "tests/unit/fake_kubelet.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace ibfabric::sriov {
namespace {

using namespace ibfabric::test_support;
using kubelet::kKubeletErrorReasons;
using kubelet::KubeletError;
using kubelet::list_pod_devices;

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(IBFABRIC_SOURCE_DIR) + "/tests/fixtures/sysfs/" + name;
}

std::unique_ptr<Collector> make(const std::string& root, const std::string& yaml) {
  boost::asio::io_context io;
  CollectorContext context{io, root, {}};
  ConfigSection section(YAML::Load(yaml), "test.yaml", "collectors.sriov");
  // The runner reads these two before the collector's own keys.
  section.get_bool("enabled", true);
  section.get_duration("interval", std::chrono::seconds(15));
  return spec().create(context, section);
}

// The collector asking the socket `socket`, without netlink. The deadline costs time only when
// a peer hangs; elsewhere it is generous, because the first gRPC call of a process under
// ThreadSanitizer took 1.8 s here.
std::unique_ptr<Collector> make_with_kubelet(const std::string& socket,
                                             const std::string& timeout = "5s") {
  return make(fixture("sriov-ib"), "{netlink: false, kubelet_socket: '" + socket +
                                       "', kubelet_timeout: " + timeout + "}");
}

// A Unix stream socket bound at `path`: listening or not, accepting or not.
class PlainSocket {
 public:
  enum class Mode { refuse, hang, junk };

  PlainSocket(const std::string& path, Mode mode) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
        << std::strerror(errno);
    // Bound but not listening: connect() is refused (ECONNREFUSED), as for a dead kubelet whose
    // socket file is left behind.
    if (mode == Mode::refuse) return;
    EXPECT_EQ(::listen(fd_, 16), 0);
    // Listening but never accepting: the kernel completes the connection and queues what the
    // client sends; nobody ever answers.
    if (mode == Mode::hang) return;
    junk_ = std::thread([this] {
      for (;;) {
        const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) return;  // shut down
        static const char kJunk[] = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n\x01\x02\x03";
        [[maybe_unused]] const auto n = ::write(client, kJunk, sizeof kJunk - 1);
        ::close(client);
      }
    });
  }
  ~PlainSocket() {
    ::shutdown(fd_, SHUT_RDWR);  // wakes the accept()
    if (junk_.joinable()) junk_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::thread junk_;
};

const std::string kNics = "openshift.io/mlnxnics";

// Two pods on VFs 2, 6 and 7, and devices that are not VFs of this node.
const std::vector<Held> kTwoPods = {
    {"ml", "train-0", "worker", kNics, {"0000:af:00.3", "0000:af:00.7"}},
    {"ml", "train-0", "worker", "nvidia.com/gpu", {"GPU-fef8089b-4820-abfc-e83e-94318197576e"}},
    {"infer", "server-1", "init", kNics, {"0000:af:01.0"}},
    {"infer", "server-1", "app", kNics, {"0000:af:01.0"}},
    {"infer", "server-1", "app", "intel.com/sriov", {"0000:3b:02.1"}},
};

std::map<std::string, std::string> pod_of(const MetricFamilies& m, const std::string& vf) {
  return info(m, "ibfabric_sriov_vf_pod_info", {{"pf", "ibp175s0"}, {"vf", vf}});
}

double errors(const MetricFamilies& m, const std::string& reason) {
  return value(m, "ibfabric_sriov_kubelet_errors_total", {{"reason", reason}}).value_or(-1);
}

// --- NUMA node -----------------------------------------------------------------------------

TEST(SriovNumaNode, Parse) {
  EXPECT_EQ(parse_numa_node("1\n"), 1);
  EXPECT_EQ(parse_numa_node("0"), 0);
  EXPECT_EQ(parse_numa_node("-1\n"), -1);
  EXPECT_FALSE(parse_numa_node("-2\n"));
  EXPECT_FALSE(parse_numa_node("node1\n"));
  EXPECT_FALSE(parse_numa_node(""));
  EXPECT_FALSE(parse_numa_node("99999999999\n"));
}

TEST(SriovNumaNode, FromEachVfsPciDevice) {
  TempDir tmp;
  fs::copy(fixture("sriov-ib"), tmp.path(),
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const fs::path bus = fs::path(tmp.path()) / "devices/pci0000:ae/0000:ae:00.0";
  std::ofstream(bus / "0000:af:00.6" / "numa_node") << "-1\n";   // VF 5: no affinity
  std::ofstream(bus / "0000:af:00.7" / "numa_node") << "one\n";  // VF 6: garbled
  fs::remove(bus / "0000:af:01.0" / "numa_node");                // VF 7: kernel without NUMA

  auto collector = make(tmp.path(), "{netlink: false, kubelet_socket: ''}");
  const auto result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  const auto& m = result.metrics;
  for (const char* vf : {"0", "1", "2", "3", "4"}) {
    EXPECT_EQ(value(m, "ibfabric_sriov_vf_numa_node", {{"pf", "ibp175s0"}, {"vf", vf}}), 1) << vf;
  }
  EXPECT_EQ(value(m, "ibfabric_sriov_vf_numa_node",
                  {{"pf", "ibp175s0"}, {"vf", "5"}, {"pci_address", "0000:af:00.6"}}),
            -1);
  EXPECT_FALSE(value(m, "ibfabric_sriov_vf_numa_node", {{"vf", "6"}}));
  EXPECT_FALSE(value(m, "ibfabric_sriov_vf_numa_node", {{"vf", "7"}}));
  // The garbled file is a read error; the missing one is not.
  EXPECT_EQ(value(m, "ibfabric_sriov_read_errors_total", {{"pf", "ibp175s0"}}), 1);
  // kubelet_socket "" turns the pod lookup off: not even declared.
  EXPECT_EQ(family(m, "ibfabric_sriov_kubelet_up"), nullptr);
}

// --- the kubelet ---------------------------------------------------------------------------

TEST(SriovKubelet, ListFlattensEveryDeviceOfEveryContainer) {
  TempDir tmp;
  const std::string socket = tmp.path() + "/kubelet.sock";
  FakeKubelet kubelet;
  kubelet.answer_with(answer(kTwoPods));
  GrpcServer server(socket, &kubelet);
  const auto devices = list_pod_devices(socket, std::chrono::milliseconds(5000));
  ASSERT_EQ(devices.size(), 6u);
  EXPECT_EQ(devices[0].namespace_name, "ml");
  EXPECT_EQ(devices[0].pod, "train-0");
  EXPECT_EQ(devices[0].container, "worker");
  EXPECT_EQ(devices[0].resource, kNics);
  EXPECT_EQ(devices[0].device_id, "0000:af:00.3");
  EXPECT_EQ(devices[1].device_id, "0000:af:00.7");
  EXPECT_EQ(devices[2].resource, "nvidia.com/gpu");
  EXPECT_EQ(devices[5].namespace_name, "infer");
  EXPECT_EQ(devices[5].container, "app");
  EXPECT_EQ(devices[5].device_id, "0000:3b:02.1");
  EXPECT_EQ(kubelet.calls(), 1);
}

// Pods come and go between collections: the series follow the kubelet's latest answer.
TEST(SriovKubelet, PodSeriesJoinTheVfAndGoAwayWithThePod) {
  TempDir tmp;
  const std::string socket = tmp.path() + "/kubelet.sock";
  FakeKubelet kubelet;
  kubelet.answer_with(answer(kTwoPods));
  GrpcServer server(socket, &kubelet);
  LogCapture log;
  auto collector = make_with_kubelet(socket);

  auto result = collect(*collector);
  EXPECT_TRUE(result.success) << result.error;
  const auto* m = &result.metrics;
  EXPECT_EQ(samples(*m, "ibfabric_sriov_vf_pod_info").size(), 3u);
  auto vf2 = pod_of(*m, "2");
  EXPECT_EQ(vf2["pci_address"], "0000:af:00.3");
  EXPECT_EQ(vf2["namespace"], "ml");
  EXPECT_EQ(vf2["pod"], "train-0");
  EXPECT_EQ(vf2["container"], "worker");
  EXPECT_EQ(vf2["resource"], kNics);
  EXPECT_EQ(pod_of(*m, "6")["pod"], "train-0");
  EXPECT_EQ(pod_of(*m, "6")["pci_address"], "0000:af:00.7");
  // One series for the VF the init container handed on to the app container.
  auto vf7 = pod_of(*m, "7");
  EXPECT_EQ(vf7["namespace"], "infer");
  EXPECT_EQ(vf7["pod"], "server-1");
  EXPECT_EQ(vf7["container"], "app,init");
  // The join labels are the VF series' own: every pod series has its vf_info twin.
  for (const auto* pod : samples(*m, "ibfabric_sriov_vf_pod_info")) {
    const auto labels = label_map(*pod);
    EXPECT_EQ(samples(*m, "ibfabric_sriov_vf_info",
                      {{"pf", labels.at("pf")},
                       {"vf", labels.at("vf")},
                       {"pci_address", labels.at("pci_address")}})
                  .size(),
              1u);
  }
  EXPECT_EQ(value(*m, "ibfabric_sriov_kubelet_up", {}), 1);
  for (const char* reason : kKubeletErrorReasons) EXPECT_EQ(errors(*m, reason), 0) << reason;
  auto lines = log.take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "info sriov: kubelet pod-resources socket found socket=" + socket);

  // train-0 is deleted.
  kubelet.answer_with(answer({kTwoPods[2], kTwoPods[3]}));
  result = collect(*collector);
  m = &result.metrics;
  EXPECT_EQ(samples(*m, "ibfabric_sriov_vf_pod_info").size(), 1u);
  EXPECT_TRUE(samples(*m, "ibfabric_sriov_vf_pod_info", {{"pod", "train-0"}}).empty());
  EXPECT_EQ(pod_of(*m, "7")["pod"], "server-1");
  EXPECT_EQ(samples(*m, "ibfabric_sriov_vf_info").size(), 8u);  // the VFs stay

  // Nothing left on the VFs.
  kubelet.answer_with(answer({}));
  result = collect(*collector);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_vf_pod_info").empty());
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_kubelet_up", {}), 1);
  EXPECT_EQ(kubelet.calls(), 3);
  EXPECT_TRUE(log.take().empty());
}

// No socket: no kubelet series and nothing logged, on every run; when the kubelet comes up,
// the next collection has the pods; when it goes, they go.
TEST(SriovKubelet, AnAbsentSocketIsSilentAndCheckedEveryRun) {
  TempDir tmp;
  const std::string socket = tmp.path() + "/pod-resources/kubelet.sock";
  LogCapture log;
  auto collector = make_with_kubelet(socket);
  for (int run = 0; run < 2; ++run) {
    const auto result = collect(*collector);
    EXPECT_TRUE(result.success) << result.error;
    EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_kubelet_up").empty());
    EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_kubelet_errors_total").empty());
    EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_vf_pod_info").empty());
    EXPECT_EQ(samples(result.metrics, "ibfabric_sriov_vf_info").size(), 8u);
  }
  EXPECT_TRUE(log.take().empty());

  fs::create_directories(tmp.path() + "/pod-resources");
  FakeKubelet kubelet;
  kubelet.answer_with(answer(kTwoPods));
  auto server = std::make_unique<GrpcServer>(socket, &kubelet);
  auto result = collect(*collector);
  EXPECT_EQ(samples(result.metrics, "ibfabric_sriov_vf_pod_info").size(), 3u);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_kubelet_up", {}), 1);

  server.reset();
  std::error_code ignored;
  fs::remove(socket, ignored);
  result = collect(*collector);
  EXPECT_TRUE(result.success);
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_vf_pod_info").empty());
  EXPECT_TRUE(samples(result.metrics, "ibfabric_sriov_kubelet_up").empty());
  const auto lines = log.take();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "info sriov: kubelet pod-resources socket found socket=" + socket);
  EXPECT_EQ(lines[1], "info sriov: kubelet pod-resources socket is gone socket=" + socket);
}

// Every way the kubelet can fail costs the pod series only: the collection succeeds with all
// its sysfs series, kubelet_up is 0, the reason is counted on every run and logged once.
struct FailureCase {
  const char* name;
  std::function<std::shared_ptr<void>(const std::string& socket)> serve;
  const char* reason;
  const char* error;  // part of the logged error
  const char* timeout = "5s";
};

void PrintTo(const FailureCase& failure, std::ostream* out) { *out << failure.name; }

class SriovKubeletFailure : public ::testing::TestWithParam<FailureCase> {};

TEST_P(SriovKubeletFailure, CostsOnlyThePodSeries) {
  const FailureCase& failure = GetParam();
  TempDir tmp;
  const std::string socket = tmp.path() + "/kubelet.sock";
  const auto peer = failure.serve(socket);
  LogCapture log;
  auto collector = make_with_kubelet(socket, failure.timeout);

  for (int run = 1; run <= 2; ++run) {
    SCOPED_TRACE(run);
    const auto result = collect(*collector);
    EXPECT_TRUE(result.success) << result.error;
    const auto& m = result.metrics;
    EXPECT_EQ(samples(m, "ibfabric_sriov_vf_info").size(), 8u);
    EXPECT_EQ(value(m, "ibfabric_sriov_pf_vfs_enabled", {{"pf", "ibp175s0"}}), 8);
    EXPECT_TRUE(samples(m, "ibfabric_sriov_vf_pod_info").empty());
    EXPECT_EQ(value(m, "ibfabric_sriov_kubelet_up", {}), 0);
    for (const char* reason : kKubeletErrorReasons) {
      EXPECT_EQ(errors(m, reason), std::string(reason) == failure.reason ? run : 0) << reason;
    }
  }
  const auto lines = log.take();
  ASSERT_EQ(lines.size(), 2u);  // found, failed; not again on the second run
  EXPECT_EQ(lines[1].rfind("warning sriov: kubelet pod-resources List failed socket=" + socket +
                               " reason=" + failure.reason + " error=\"List: ",
                           0),
            0u)
      << lines[1];
  EXPECT_NE(lines[1].find(failure.error), std::string::npos) << lines[1];
}

INSTANTIATE_TEST_SUITE_P(
    Sriov, SriovKubeletFailure,
    ::testing::Values(
        FailureCase{"Refused",
                    [](const std::string& s) {
                      return std::make_shared<PlainSocket>(s, PlainSocket::Mode::refuse);
                    },
                    "unavailable", "gRPC status 14: failed to connect to all addresses"},
        FailureCase{"Hangs",
                    [](const std::string& s) {
                      return std::make_shared<PlainSocket>(s, PlainSocket::Mode::hang);
                    },
                    "timeout", "no answer within 300ms", "300ms"},
        FailureCase{"SpeaksSomethingElse",
                    [](const std::string& s) {
                      return std::make_shared<PlainSocket>(s, PlainSocket::Mode::junk);
                    },
                    "unavailable", ""},
        FailureCase{"AnswersBytesThatDoNotParse",
                    [](const std::string& s) {
                      struct Peer {
                        FakeKubelet kubelet;
                        std::unique_ptr<GrpcServer> server;
                      };
                      auto peer = std::make_shared<Peer>();
                      peer->kubelet.garble();
                      peer->server = std::make_unique<GrpcServer>(s, &peer->kubelet);
                      return peer;
                    },
                    "malformed", "is not a ListPodResourcesResponse"},
        FailureCase{"HasNoPodResourcesService",
                    [](const std::string& s) { return std::make_shared<GrpcServer>(s, nullptr); },
                    "unimplemented", "gRPC status 12"}),
    [](const ::testing::TestParamInfo<FailureCase>& info) { return std::string(info.param.name); });

// A daemon user without write access to the kubelet's socket (the packaged service on a
// Kubernetes node): its own reason, with the fix in the message, before any gRPC. Checked in a
// child process that drops root (the test runs as root, which may connect anywhere); the
// scratch directory is 0700 root, so the socket is out of reach of nobody.
TEST(SriovKubelet, NoAccessToTheSocketIsPermissionDenied) {
  TempDir tmp;
  const std::string socket = tmp.path() + "/kubelet.sock";
  FakeKubelet kubelet;
  GrpcServer server(socket, &kubelet);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    if (::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
        ::setresuid(65534, 65534, 65534) == 0) {
      try {
        list_pod_devices(socket, std::chrono::milliseconds(300));
        code = 2;
      } catch (const KubeletError& e) {
        code = e.reason() == "permission_denied" &&
                       std::string(e.what()).find("kubelet_socket: \"\"") != std::string::npos
                   ? 0
                   : 1;
      }
    }
    ::_exit(code);
  }
  // Bounded: if the check is gone, the child goes on into gRPC, which after fork() may never
  // return (seen: it hung until killed).
  int status = 0;
  pid_t waited = 0;
  for (int i = 0; i < 1000 && waited == 0; ++i) {
    waited = ::waitpid(child, &status, WNOHANG);
    if (waited == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (waited == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL() << "the child did not finish within 10 s: it reached gRPC";
  }
  ASSERT_EQ(waited, child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: another reason, 2: it answered, 3: setresuid failed";
  EXPECT_EQ(kubelet.calls(), 0);
  // Root, on the same socket, is let in.
  EXPECT_NO_THROW(list_pod_devices(socket, std::chrono::milliseconds(5000)));
}

// A kubelet that fails and comes back: logged when it fails, when the failure changes, and when
// it works again; the counters keep counting.
TEST(SriovKubelet, RecoveryIsLoggedAndTheCountsStay) {
  TempDir tmp;
  const std::string socket = tmp.path() + "/kubelet.sock";
  FakeKubelet kubelet;
  kubelet.garble();
  auto server = std::make_unique<GrpcServer>(socket, &kubelet);
  LogCapture log;
  auto collector = make_with_kubelet(socket);
  collect(*collector);
  collect(*collector);

  // The kubelet restarts; for one collection its socket is a stale file nobody listens on.
  server.reset();
  std::error_code ignored;
  fs::remove(socket, ignored);
  auto stale = std::make_unique<PlainSocket>(socket, PlainSocket::Mode::refuse);
  auto result = collect(*collector);
  EXPECT_EQ(errors(result.metrics, "malformed"), 2);
  EXPECT_EQ(errors(result.metrics, "unavailable"), 1);

  stale.reset();
  fs::remove(socket, ignored);
  kubelet.answer_with(answer(kTwoPods));
  server = std::make_unique<GrpcServer>(socket, &kubelet);
  result = collect(*collector);
  EXPECT_EQ(value(result.metrics, "ibfabric_sriov_kubelet_up", {}), 1);
  EXPECT_EQ(samples(result.metrics, "ibfabric_sriov_vf_pod_info").size(), 3u);
  EXPECT_EQ(errors(result.metrics, "malformed"), 2);
  EXPECT_EQ(errors(result.metrics, "unavailable"), 1);

  const auto lines = log.take();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("reason=malformed"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("reason=unavailable"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "info sriov: kubelet pod-resources List works again socket=" + socket);
}

TEST(SriovKubelet, ConfigKeys) {
  const std::string root = fixture("sriov-ib");
  EXPECT_NO_THROW(make(root, "{kubelet_socket: /run/kubelet.sock, kubelet_timeout: 500ms}"));
  EXPECT_NO_THROW(make(root, "kubelet_socket: ''"));
  EXPECT_THROW(make(root, "kubelet_socket: kubelet.sock"), ConfigError);  // relative
  EXPECT_THROW(make(root, "kubelet_timeout: 0s"), ConfigError);
  EXPECT_THROW(make(root, "kubelet_timeout: 11s"), ConfigError);
  EXPECT_THROW(make(root, "kubelet_timeout: 15s"), ConfigError);  // the default interval
  EXPECT_THROW(make(root, "{interval: 1s, kubelet_timeout: 2s}"), ConfigError);
  EXPECT_NO_THROW(make(root, "{interval: 1s, kubelet_timeout: 900ms}"));
  // Without kubelet_timeout, the deadline is 2s or half the interval, whichever is shorter.
  EXPECT_NO_THROW(make(root, "interval: 200ms"));
  try {
    make(root, "{interval: 1s, kubelet_timeout: 2s}");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than the interval (1s)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ibfabric::sriov
