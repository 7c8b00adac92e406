#include "ib/link_rate.h"

#include <cmath>

namespace ibfabric::link_rate {
namespace {

struct Row {
  LaneSpeed speed;
  std::string_view name;
  double signaling_gbps;
  double data_gbps;
};

// The data column is written out rather than computed so each figure can be checked against
// the specification by eye; tests/unit/link_rate_test.cpp recomputes it from the encodings.
constexpr Row kRows[] = {
    {LaneSpeed::sdr, "SDR", 2.5, 2.0},
    {LaneSpeed::ddr, "DDR", 5.0, 4.0},
    {LaneSpeed::qdr, "QDR", 10.0, 8.0},
    {LaneSpeed::fdr10, "FDR10", 10.3125, 10.0},
    {LaneSpeed::fdr, "FDR", 14.0625, 14.0625 * 64 / 66},
    {LaneSpeed::edr, "EDR", 25.78125, 25.0},
    {LaneSpeed::hdr, "HDR", 53.125, 50.0},
    {LaneSpeed::ndr, "NDR", 106.25, 100.0},
    {LaneSpeed::xdr, "XDR", 212.5, 200.0},
};

const Row& row(LaneSpeed speed) {
  for (const auto& r : kRows) {
    if (r.speed == speed) return r;
  }
  return kRows[0];  // unreachable: every enumerator has a row
}

}  // namespace

std::optional<LaneSpeed> lane_speed_from_name(std::string_view name) {
  for (const auto& r : kRows) {
    if (r.name == name) return r.speed;
  }
  return std::nullopt;
}

std::string_view name(LaneSpeed speed) { return row(speed).name; }

std::optional<LaneSpeed> lane_speed_from_signaling_gbps(double gbps) {
  for (const auto& r : kRows) {
    if (std::fabs(gbps - r.signaling_gbps) <= r.signaling_gbps * 1e-3) return r.speed;
  }
  return std::nullopt;
}

double signaling_gbps(LaneSpeed speed) { return row(speed).signaling_gbps; }
double data_gbps(LaneSpeed speed) { return row(speed).data_gbps; }

std::optional<double> effective_bytes_per_second(LaneSpeed speed, int lanes) {
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 12) return std::nullopt;
  return data_gbps(speed) * lanes * 1e9 / 8;
}

std::optional<double> effective_bytes_per_second(double lane_gbps_signaling, int lanes) {
  auto speed = lane_speed_from_signaling_gbps(lane_gbps_signaling);
  if (!speed) return std::nullopt;
  return effective_bytes_per_second(*speed, lanes);
}

std::optional<double> effective_bytes_per_second(const mad::PortInfo& pi) {
  auto speed = lane_speed_from_name(mad::active_speed_name(pi));
  if (!speed) return std::nullopt;
  return effective_bytes_per_second(*speed, mad::lanes(pi.width_active));
}

}  // namespace ibfabric::link_rate
