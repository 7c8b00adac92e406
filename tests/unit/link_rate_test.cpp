// Link rates worked out by hand from the lane rates and encodings in ib/link_rate.h.

#include "ib/link_rate.h"

#include <gtest/gtest.h>

namespace ibfabric::link_rate {
namespace {

TEST(LinkRate, HandComputedLinkDataRates) {
  // 4 lanes * 10 Gb/s * 8/10 = 32 Gb/s = 4e9 B/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::qdr, 4), 4e9);
  // 4 * 25.78125 * 64/66 = 100 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::edr, 4), 12.5e9);
  // 4 * 100 Gb/s = 400 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::ndr, 4), 50e9);
  // 1 * 2.5 * 8/10 = 2 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::sdr, 1), 0.25e9);
  // 12 * 5 * 8/10 = 48 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::ddr, 12), 6e9);
  // 4 * 10.3125 * 64/66 = 40 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::fdr10, 4), 5e9);
  // 4 * 14.0625 * 64/66 = 54.5454... Gb/s = 6818181818.18... B/s.
  EXPECT_NEAR(*effective_bytes_per_second(LaneSpeed::fdr, 4), 6818181818.18, 0.01);
  // 2 * 50 Gb/s (the RoCE fixture's "2X HDR") and 8 * 200 Gb/s.
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::hdr, 2), 12.5e9);
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::xdr, 8), 200e9);
}

TEST(LinkRate, DataRatesFollowFromTheEncodings) {
  for (auto speed : {LaneSpeed::sdr, LaneSpeed::ddr, LaneSpeed::qdr}) {
    EXPECT_DOUBLE_EQ(data_gbps(speed), signaling_gbps(speed) * 8 / 10) << name(speed);
  }
  for (auto speed : {LaneSpeed::fdr10, LaneSpeed::fdr, LaneSpeed::edr}) {
    EXPECT_DOUBLE_EQ(data_gbps(speed), signaling_gbps(speed) * 64 / 66) << name(speed);
  }
  // 256b/257b transcoding and RS(544,514) FEC.
  for (auto speed : {LaneSpeed::hdr, LaneSpeed::ndr, LaneSpeed::xdr}) {
    EXPECT_DOUBLE_EQ(data_gbps(speed), signaling_gbps(speed) * 256 / 257 * 514 / 544)
        << name(speed);
  }
}

TEST(LinkRate, NamesAndSignalingRatesMapToSpeeds) {
  EXPECT_EQ(lane_speed_from_name("NDR"), LaneSpeed::ndr);
  EXPECT_EQ(lane_speed_from_name("FDR10"), LaneSpeed::fdr10);
  EXPECT_EQ(lane_speed_from_name("FDR"), LaneSpeed::fdr);
  EXPECT_EQ(lane_speed_from_name("ndr"), std::nullopt);  // the kernel writes upper case
  EXPECT_EQ(lane_speed_from_name("GDR"), std::nullopt);
  EXPECT_EQ(name(LaneSpeed::xdr), "XDR");
  EXPECT_EQ(lane_speed_from_signaling_gbps(10.0), LaneSpeed::qdr);
  EXPECT_EQ(lane_speed_from_signaling_gbps(10.3125), LaneSpeed::fdr10);
  EXPECT_EQ(lane_speed_from_signaling_gbps(14.06), LaneSpeed::fdr);
  EXPECT_EQ(lane_speed_from_signaling_gbps(53.125), LaneSpeed::hdr);
  EXPECT_EQ(lane_speed_from_signaling_gbps(50.0), std::nullopt);  // a data rate, not signalling
  EXPECT_EQ(effective_bytes_per_second(25.78125, 4), 12.5e9);
  EXPECT_EQ(effective_bytes_per_second(106.25, 4), 50e9);
  EXPECT_EQ(effective_bytes_per_second(7.0, 4), std::nullopt);
}

TEST(LinkRate, OnlyRealWidths) {
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::edr, 3), std::nullopt);
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::edr, 0), std::nullopt);
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::edr, 16), std::nullopt);
  EXPECT_EQ(effective_bytes_per_second(LaneSpeed::edr, 8), 25e9);
}

}  // namespace
}  // namespace ibfabric::link_rate
