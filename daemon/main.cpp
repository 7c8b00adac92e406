#include "daemon/app.h"
#include "ibfabric/version.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
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
    return ibfabric::App(std::move(options)).run();
  } catch (const std::exception& e) {
    spdlog::critical("msg=\"fatal error\" error=\"{}\"", e.what());
    return 1;
  }
}
