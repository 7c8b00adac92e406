// The localizer at scale, on synthetic 3-level fat trees (tests/unit/synthetic_fabric.h):
//
//   localize_scale [--hosts 1024] [--seed 1] [--scenarios 100] [--only I] [--verbose] [fabric]
//       random scenarios of one to three faults (loss of 1-30 % on a cable direction, a stalled
//       host, a daemon failing locally, a congested port) over background noise; scores every
//       verdict against the faults and prints the totals. Each scenario replays alone with the
//       `--seed S --only I` it prints. Exit status 1 when a bystander was named or fewer than
//       95 % of the distinguishable culprits were. Also counted: the culprits a settled verdict
//       named (confirmed half an interval after found) and the bystanders among them, which
//       `--counter-probability 0` (no counter arrived yet) is there to find.
//   localize_scale --time [--time-hosts 10000,100000] [--repeat 5] [--seed 1] [--only 0] [fabric]
//       per size, in a process of its own, with the faults and noise of scenario --only: the
//       time to build the evidence, then the wall and CPU time of one localize() (median of
//       --repeat), and the peak RSS after each.
//
//   fabric: [--peers 3] [--probes 60] [--hosts-per-leaf 40] [--leaves-per-pod 16] [--aggs 8]
//           [--cores-per-agg 16] [--counter-probability 0.8]
//   localizer options, to try other thresholds: [--min-gain 10] [--equal-fit 2] [--min-lost 4]
//       [--min-lost-host 6] [--settle-margin 12]

#include "localize/localizer.h"
#include "tests/unit/synthetic_fabric.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ibfabric::localize;
using namespace ibfabric::localize::synthetic;

struct Args {
  Shape shape;
  Settings settings;
  std::uint64_t seed = 1;
  std::uint32_t scenarios = 100;
  std::optional<std::uint32_t> only;
  bool verbose = false;
  bool time = false;
  std::vector<std::uint32_t> time_hosts = {10000, 100000};
  std::uint32_t repeat = 5;
  Options options;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "localize_scale: %s (see the head of bench/localize_scale.cpp)\n", why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  int i = 1;
  auto value = [&]() -> const char* {
    if (i + 1 >= argc) usage((std::string("missing value of ") + argv[i]).c_str());
    return argv[++i];
  };
  auto u64 = [&]() { return std::strtoull(value(), nullptr, 10); };
  auto u32 = [&]() { return static_cast<std::uint32_t>(u64()); };
  const std::map<std::string, std::function<void()>> handlers = {
      {"--hosts", [&] { a.shape.hosts = u32(); }},
      {"--seed", [&] { a.seed = u64(); }},
      {"--scenarios", [&] { a.scenarios = u32(); }},
      {"--only", [&] { a.only = u32(); }},
      {"--verbose", [&] { a.verbose = true; }},
      {"--time", [&] { a.time = true; }},
      {"--repeat", [&] { a.repeat = std::max(1u, u32()); }},
      {"--peers", [&] { a.settings.peers = u32(); }},
      {"--probes", [&] { a.settings.probes = u32(); }},
      {"--hosts-per-leaf", [&] { a.shape.hosts_per_leaf = u32(); }},
      {"--leaves-per-pod", [&] { a.shape.leaves_per_pod = u32(); }},
      {"--aggs", [&] { a.shape.aggs_per_pod = u32(); }},
      {"--cores-per-agg", [&] { a.shape.cores_per_agg = u32(); }},
      {"--counter-probability", [&] { a.settings.counter_probability = std::atof(value()); }},
      {"--min-gain", [&] { a.options.min_gain = std::atof(value()); }},
      {"--equal-fit", [&] { a.options.equal_fit = std::atof(value()); }},
      {"--min-lost", [&] { a.options.min_lost = std::atof(value()); }},
      {"--min-lost-host", [&] { a.options.min_lost_host = std::atof(value()); }},
      {"--settle-margin", [&] { a.options.settle_margin = std::atof(value()); }},
      {"--time-hosts",
       [&] {
         a.time_hosts.clear();
         for (const char* p = value(); *p;) {
           char* end = nullptr;
           const unsigned long n = std::strtoul(p, &end, 10);
           if (end == p || (*end && *end != ',')) usage("bad --time-hosts");
           a.time_hosts.push_back(static_cast<std::uint32_t>(n));
           p = *end ? end + 1 : end;
         }
       }},
  };
  for (; i < argc; ++i) {
    const auto it = handlers.find(argv[i]);
    if (it == handlers.end()) usage((std::string("unknown argument ") + argv[i]).c_str());
    it->second();
  }
  if (a.shape.hosts < 2 || a.shape.hosts_per_leaf == 0 || a.shape.leaves_per_pod == 0 ||
      a.shape.aggs_per_pod == 0 || a.shape.cores_per_agg == 0 || a.settings.peers == 0) {
    usage("the fabric needs 2 hosts, 1 peer and a switch of each level");
  }
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string thousands(std::uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
  return s;
}

std::size_t hops(const std::vector<Pair>& pairs) {
  std::size_t n = 0;
  for (const Pair& p : pairs) n += p.path.size();
  return n;
}

void print_fabric(const FatTree& tree, const std::vector<Pair>& pairs, const Settings& s) {
  std::printf(
      "fat tree: %s hosts, %u leaves (%u hosts each), %u pods, %s switches, %s cables; "
      "%s pairs (%u peers a host), %s path hops, %u probes a pair in the window\n",
      thousands(tree.shape().hosts).c_str(), tree.leaves(), tree.shape().hosts_per_leaf,
      tree.pods(), thousands(tree.switches()).c_str(), thousands(tree.cables().size()).c_str(),
      thousands(pairs.size()).c_str(), s.peers, thousands(hops(pairs)).c_str(), s.probes);
}

// --- scenarios ---------------------------------------------------------------------------

struct Row {
  std::uint32_t faults = 0, unobservable = 0, unobservable_named = 0, distinguishable = 0;
  std::uint32_t distinguishable_named = 0, alone = 0, in_set = 0, missed = 0, lookalike = 0;
  std::uint32_t settled = 0;
};

std::string row_name(const FatTree& tree, const Fault& f) {
  if (f.kind == FaultKind::loss || f.kind == FaultKind::congestion) {
    return std::string(fault_kind_name(f.kind)) + ", " + tier_name(tree.tier(cable_of(f.link)));
  }
  return fault_kind_name(f.kind);
}

int run_scenarios(const Args& a) {
  const FatTree tree(a.shape);
  const std::vector<Pair> pairs = make_pairs(tree, a.settings, a.seed);
  const PairIndex index(tree, pairs);
  const Options& options = a.options;
  print_fabric(tree, pairs, a.settings);
  std::printf("seed %llu, %s\n", static_cast<unsigned long long>(a.seed),
              a.only ? ("scenario " + std::to_string(*a.only)).c_str()
                     : (std::to_string(a.scenarios) + " scenarios").c_str());

  std::map<std::string, Row> rows;
  std::vector<double> times;
  std::uint32_t bystanders = 0, scenarios_with_bystanders = 0, lookalikes = 0;
  std::uint32_t settled_bystanders = 0;
  const std::uint32_t first = a.only.value_or(0), last = a.only ? *a.only + 1 : a.scenarios;
  for (std::uint32_t i = first; i < last; ++i) {
    const Scenario s = make_scenario(tree, pairs, a.settings, a.seed, i);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Verdict> verdicts = localize(s.evidence, options);
    times.push_back(seconds_since(t0));
    const ScenarioScore sc = score(tree, s, index, verdicts, options);

    bystanders += static_cast<std::uint32_t>(sc.bystanders.size());
    settled_bystanders += sc.settled_bystanders;
    scenarios_with_bystanders += sc.bystanders.empty() ? 0 : 1;
    lookalikes += sc.lookalikes;
    bool problem = !sc.bystanders.empty();
    for (std::size_t k = 0; k < s.faults.size(); ++k) {
      const FaultScore& fs = sc.faults[k];
      Row& r = rows[row_name(tree, s.faults[k])];
      ++r.faults;
      if (!fs.unobservable.empty()) {
        ++r.unobservable;
        r.unobservable_named += fs.outcome != Outcome::missed ? 1 : 0;
        continue;
      }
      r.distinguishable += fs.distinguishable ? 1 : 0;
      r.distinguishable_named += fs.distinguishable && fs.outcome != Outcome::missed ? 1 : 0;
      r.alone += fs.outcome == Outcome::alone ? 1 : 0;
      r.in_set += fs.outcome == Outcome::in_set ? 1 : 0;
      r.missed += fs.outcome == Outcome::missed ? 1 : 0;
      r.settled += fs.outcome != Outcome::missed && fs.settled ? 1 : 0;
      r.lookalike += fs.outcome == Outcome::missed && fs.lookalike_named ? 1 : 0;
      problem = problem || fs.outcome == Outcome::missed;
    }
    if (!problem && !a.verbose) continue;
    std::printf("scenario %u (--seed %llu --only %u): %zu verdicts in %.3f s%s\n", i,
                static_cast<unsigned long long>(a.seed), i, verdicts.size(), times.back(),
                problem ? "  <-- look" : "");
    for (std::size_t k = 0; k < s.faults.size(); ++k) {
      const FaultScore& fs = sc.faults[k];
      const char* outcome = fs.outcome == Outcome::alone    ? "named alone"
                            : fs.outcome == Outcome::in_set ? "named in a set"
                            : fs.unobservable.empty()       ? "MISSED"
                                                            : "not named";
      std::printf(
          "  %-15s %s%s%s%s\n", outcome, describe(tree, s.faults[k]).c_str(),
          fs.unobservable.empty() ? "" : ("; not observable: " + fs.unobservable).c_str(),
          fs.unobservable.empty() && !fs.distinguishable ? "; has look-alikes" : "",
          fs.outcome == Outcome::missed && fs.lookalike_named ? "; a look-alike named" : "");
    }
    for (const std::string& b : sc.bystanders) std::printf("  BYSTANDER       %s\n", b.c_str());
    if (a.verbose) {
      for (const Verdict& v : verdicts) {
        std::string names;
        for (const Suspect& su : v.suspects) {
          for (Component c : components_of(su))
            names += (names.empty() ? "" : ", ") + describe(tree, c);
        }
        std::printf("    verdict %s: %s (%zu pairs, %.0f lost, %.0f late)\n      why: %s\n",
                    v.cause.c_str(), names.c_str(), v.pairs.size(), v.lost, v.late, v.why.c_str());
        // Its evidence, pair by pair: what an engineer asking "why this?" reads.
        for (std::uint32_t p : v.pairs) {
          const Pair& pair = s.evidence.pairs[p];
          std::printf("      pair %s -> %s: %.0f sent, %.0f lost, %.0f late\n",
                      s.evidence.hosts[pair.prober].name.c_str(),
                      s.evidence.hosts[pair.peer].name.c_str(), pair.sent, pair.lost, pair.late);
        }
      }
    }
  }

  std::printf("\n%-29s %6s %8s %8s %6s %8s %6s %10s\n", "fault", "faults", "not obs.", "distinct",
              "alone", "in a set", "missed", "look-alike");
  Row total;
  for (const auto& [name, r] : rows) {
    std::printf("%-29s %6u %8u %8u %6u %8u %6u %10u\n", name.c_str(), r.faults, r.unobservable,
                r.distinguishable, r.alone, r.in_set, r.missed, r.lookalike);
    total.faults += r.faults;
    total.unobservable += r.unobservable;
    total.unobservable_named += r.unobservable_named;
    total.distinguishable += r.distinguishable;
    total.distinguishable_named += r.distinguishable_named;
    total.alone += r.alone;
    total.in_set += r.in_set;
    total.missed += r.missed;
    total.lookalike += r.lookalike;
    total.settled += r.settled;
  }
  std::printf("%-29s %6u %8u %8u %6u %8u %6u %10u\n", "total", total.faults, total.unobservable,
              total.distinguishable, total.alone, total.in_set, total.missed, total.lookalike);
  const std::uint32_t observable = total.faults - total.unobservable;
  const double share =
      total.distinguishable ? 100.0 * total.distinguishable_named / total.distinguishable : 100.0;
  std::printf(
      "\nculprits the probes can see: %u: named alone %u, in an equally-suspect set %u, "
      "missed %u (of which a look-alike named instead: %u)\n",
      observable, total.alone, total.in_set, total.missed, total.lookalike);
  std::printf("named in a settled verdict (confirmed half an interval after found): %u of %u\n",
              total.settled, total.alone + total.in_set);
  std::printf("distinguishable culprits named: %u of %u (%.1f %%; target >= 95 %%)\n",
              total.distinguishable_named, total.distinguishable, share);
  std::printf("not observable: %u (named anyway: %u)\n", total.unobservable,
              total.unobservable_named);
  std::printf(
      "bystanders: %u in %u scenarios (target 0), %u of them settled; look-alikes named: %u\n",
      bystanders, scenarios_with_bystanders, settled_bystanders, lookalikes);
  std::printf("localize(): median %.3f s, max %.3f s a scenario\n", median(times),
              *std::max_element(times.begin(), times.end()));
  return bystanders == 0 && share >= 95.0 ? 0 : 1;
}

// --- timing ------------------------------------------------------------------------------

void time_one(const Args& a, std::uint32_t hosts) {
  Shape shape = a.shape;
  shape.hosts = hosts;
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  const FatTree tree(shape);
  std::vector<Pair> pairs = make_pairs(tree, a.settings, a.seed);
  const std::size_t n_pairs = pairs.size(), n_hops = hops(pairs);
  const Scenario s = make_scenario(tree, std::move(pairs), a.settings, a.seed, a.only.value_or(0));
  const double build_wall = seconds_since(t0), build_cpu = cpu_seconds() - c0;
  const double rss_built = peak_rss_mib();

  std::vector<double> walls, cpus;
  std::size_t verdicts = 0;
  for (std::uint32_t i = 0; i < a.repeat; ++i) {
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_seconds();
    verdicts = localize(s.evidence, a.options).size();
    cpus.push_back(cpu_seconds() - c1);
    walls.push_back(seconds_since(t1));
  }
  std::printf("%8s %8s %10s %9.2f s %7.2f s %8.0f MiB %9.3f s %8.3f s %8.0f MiB %4zu\n",
              thousands(hosts).c_str(), thousands(n_pairs).c_str(), thousands(n_hops).c_str(),
              build_wall, build_cpu, rss_built, median(walls), median(cpus), peak_rss_mib(),
              verdicts);
}

int run_timing(const Args& a) {
  std::printf(
      "one window's evidence (the faults and noise of scenario %u of seed %llu), %u peers "
      "a host, %u probes a pair; localize() timed %u times (median); each size in a "
      "process of its own\n",
      a.only.value_or(0), static_cast<unsigned long long>(a.seed), a.settings.peers,
      a.settings.probes, a.repeat);
  std::printf("%8s %8s %10s %11s %9s %12s %11s %10s %12s %4s\n", "hosts", "pairs", "hops",
              "build wall", "cpu", "RSS built", "localize", "cpu", "peak RSS", "verd");
  for (std::uint32_t hosts : a.time_hosts) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) usage("fork failed");
    if (pid == 0) {
      time_one(a, hosts);
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("%8s hosts: the measuring process failed (status %d)\n", thousands(hosts).c_str(),
                  status);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  return a.time ? run_timing(a) : run_scenarios(a);
}
