#include "daemon/app.h"
#include "ibfabric/version.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <malloc.h>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  // Before any thread: it changes the environment (mad/engine.h).
  ibfabric::mad::take_simulator_issm();
  // Blocks of 128 KiB and more (a large sweep's samples, a table's answer) are mapped and given
  // back when freed. glibc raises this threshold to the largest block freed so far, after which
  // they come from the heap and stay resident between sweeps (docs/benchmarks.md, 2026-11-29:
  // 0.83 against 0.89-0.90 KiB per swept port at the median RSS, 50,000 ports).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // Plain lines on stderr; under journald (JOURNAL_STREAM set) its own timestamps suffice.
  auto logger = spdlog::stderr_logger_mt("ibfabricd");
  logger->set_pattern(std::getenv("JOURNAL_STREAM") ? "level=%l %v"
                                                    : "%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  spdlog::set_default_logger(logger);

  ibfabric::Options options;
  try {
    options = ibfabric::parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "ibfabricd: " << e.what() << '\n';
    return 2;
  }
  if (options.help) {
    std::cout << ibfabric::usage();
    return 0;
  }
  if (options.version) {
    std::cout << "ibfabricd " << ibfabric::kVersion << " (" << ibfabric::kBuildType << ", "
              << ibfabric::kCompiler << ")\n";
    return 0;
  }
  try {
    int code = 0;
    {
      ibfabric::App app(std::move(options));
      code = app.run();
      if (std::size_t stuck = app.runs_in_flight(); stuck > 0) {
        // A collector thread is still in a read that may never return (a hung sysfs file). It
        // cannot be joined or cancelled, and destructors would free what it still uses: end
        // the process here, after flushing what was written.
        spdlog::warn(
            "msg=\"exiting without waiting for collector runs that have not returned\" "
            "collectors={}",
            stuck);
        spdlog::default_logger()->flush();
        std::cout.flush();
        std::_Exit(code);
      }
    }
    // Everything of ours is torn down: what fails after this line is an exit handler of a
    // library (the simulator's shim has one that a late MAD can crash, test_start_under_probes).
    spdlog::info("msg=\"exiting\" code={}", code);
    return code;
  } catch (const std::exception& e) {
    spdlog::critical("msg=\"fatal error\" error=\"{}\"", e.what());
    return 1;
  }
}
