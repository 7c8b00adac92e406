#pragma once
// InfiniBand link speeds: the signalling rate of one lane and the data rate left after line
// encoding (and, from HDR on, forward error correction), shared by the sysfs collector (the
// kernel's `rate` file) and the MAD collectors (PortInfo LinkSpeedActive/LinkSpeedExtActive).
//
// Where the figures come from (IBTA InfiniBand Architecture Specification Vol. 2, and the IEEE
// 802.3 clauses whose lane coding HDR/NDR/XDR share):
//   SDR 2.5, DDR 5, QDR 10 Gb/s per lane, 8b/10b: data is 8/10 of signalling (2, 4, 8 Gb/s).
//   FDR10 10.3125 and FDR 14.0625 Gb/s, EDR 25.78125 Gb/s, 64b/66b: data is 64/66 of
//     signalling (10, 13.6363..., 25 Gb/s).
//   HDR 53.125, NDR 106.25, XDR 212.5 Gb/s (PAM4): 64b/66b blocks transcoded to 256b/257b and
//     protected by RS(544,514) FEC, so data is 53.125 * (256/257) * (514/544) = 50 Gb/s per
//     lane, and 100 and 200 for NDR and XDR: the conventional 50/100/200 Gb/s per lane.
// The kernel's `rate` file prints a nominal per-lane figure (2.5, 5, 10, 10, 14, 25, 50, 100,
// 200 Gb/s) times the width, which equals the data rate only from EDR on.

#include "mad/attributes.h"

#include <optional>
#include <string_view>

namespace ibfabric::link_rate {

enum class LaneSpeed { sdr, ddr, qdr, fdr10, fdr, edr, hdr, ndr, xdr };

// "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR" (the kernel's and
// ibstat's spelling); nullopt for anything else.
std::optional<LaneSpeed> lane_speed_from_name(std::string_view name);
std::string_view name(LaneSpeed speed);

// A lane's signalling rate in Gb/s as listed above (2.5 ... 212.5) -> the speed; matches within
// 0.1%, so 14.0625 and 14.06 both give FDR. QDR and FDR10 are told apart (10 vs 10.3125).
std::optional<LaneSpeed> lane_speed_from_signaling_gbps(double gbps);

double signaling_gbps(LaneSpeed speed);
// Data rate of one lane after line encoding (and FEC), in Gb/s.
double data_gbps(LaneSpeed speed);

// Data rate of a link of `lanes` lanes (1, 2, 4, 8 or 12; nullopt for other widths), in bytes
// per second: 4X QDR is 32 Gb/s, 4e9 B/s; 4X EDR 100 Gb/s, 1.25e10 B/s.
std::optional<double> effective_bytes_per_second(LaneSpeed speed, int lanes);
std::optional<double> effective_bytes_per_second(double lane_gbps_signaling, int lanes);
// A port's, from its PortInfo (LinkSpeedActive or LinkSpeedExtActive, LinkWidthActive).
std::optional<double> effective_bytes_per_second(const mad::PortInfo& pi);

}  // namespace ibfabric::link_rate
