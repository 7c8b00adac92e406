#include "core/log_format.h"
#include "ibfabric/version.h"
#include "localizer/app.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
  auto logger = spdlog::stderr_logger_mt("ibfabric-localize");
  ibfabric::set_log_format(*logger, "logfmt");
  spdlog::set_default_logger(logger);
  ibfabric::localizer::Flags options;
  try {
    options = ibfabric::localizer::parse_flags(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "ibfabric-localize: " << e.what() << '\n';
    return 2;
  }
  ibfabric::set_log_format(*logger, options.log_format);
  if (options.help) {
    std::cout << ibfabric::localizer::usage();
    return 0;
  }
  if (options.version) {
    std::cout << "ibfabric-localize " << ibfabric::kVersion << " (" << ibfabric::kBuildType << ", "
              << ibfabric::kCompiler << ")\n";
    return 0;
  }
  try {
    return ibfabric::localizer::run(options);
  } catch (const std::exception& e) {
    spdlog::critical("msg=\"fatal error\" error=\"{}\"", e.what());
    return 1;
  }
}
