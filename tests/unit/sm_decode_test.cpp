#include "collectors/sm/sm_decode.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace ibfabric::sm {
namespace {

// SMInfo as written in IBA vol 1, 14.2.5.13, byte by byte (not through libibmad, so that the
// field table the decoder uses is checked against the layout): GUID, SM_Key, ActCount, then
// Priority in the high nibble and SMState in the low nibble of octet 20.
constexpr std::array<std::uint8_t, 24> kStandbySmInfo = {
    0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc3,  // GUID
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // SM_Key (not exported)
    0x00, 0x01, 0x23, 0x45,                          // ActCount
    0xe2, 0x00, 0x00, 0x00,                          // Priority 14, SMState 2 (standby)
};

TEST(SmInfoDecode, FieldsAtTheirSpecOffsets) {
  auto info = decode_sm_info(kStandbySmInfo.data());
  EXPECT_EQ(info.guid, 0x0002c90300a1b2c3ull);
  EXPECT_EQ(info.activity_count, 0x12345u);
  EXPECT_EQ(info.priority, 14);
  EXPECT_EQ(info.state, kStandby);
}

TEST(SmInfoDecode, StateNames) {
  EXPECT_STREQ(state_name(0), "not_active");
  EXPECT_STREQ(state_name(1), "discovering");
  EXPECT_STREQ(state_name(2), "standby");
  EXPECT_STREQ(state_name(3), "master");
  EXPECT_STREQ(state_name(9), "unknown");
}

// An SA GetTableResp of SMInfoRecords as a small table arrives: the SA header's
// AttributeOffset (octets 44-45 of the MAD, after the 24-octet common header, the
// 12-octet RMPP header and the 8-octet SM_Key, in 8-octet words) gives the record size; the
// records start at octet 56; the rest of the last MAD is zero.
std::vector<std::uint8_t> sa_table(std::uint16_t attr_offset_words,
                                   const std::vector<std::vector<std::uint8_t>>& records,
                                   std::size_t total = IB_MAD_SIZE) {
  std::vector<std::uint8_t> mad(total, 0);
  mad[1] = IB_SA_CLASS;
  mad[44] = static_cast<std::uint8_t>(attr_offset_words >> 8);
  mad[45] = static_cast<std::uint8_t>(attr_offset_words & 0xff);
  std::size_t at = IB_SA_DATA_OFFS;
  for (const auto& r : records) {
    std::copy(r.begin(), r.end(), mad.begin() + static_cast<std::ptrdiff_t>(at));
    at += attr_offset_words * 8u;
  }
  return mad;
}

std::vector<std::uint8_t> record(std::uint16_t lid, const std::array<std::uint8_t, 24>& sminfo) {
  std::vector<std::uint8_t> r(4 + sminfo.size(), 0);
  r[0] = static_cast<std::uint8_t>(lid >> 8);
  r[1] = static_cast<std::uint8_t>(lid & 0xff);
  for (std::size_t i = 0; i < sminfo.size(); ++i) r[4 + i] = sminfo[i];
  return r;
}

TEST(SmInfoRecordDecode, TwoRecordsAndPadding) {
  auto master = kStandbySmInfo;
  master[7] = 0x01;  // another GUID
  master[19] = 0x99;
  master[20] = 0xa3;  // priority 10, master
  // 28 octets of record padded to 32 (AttributeOffset 4), as opensm sends them.
  auto mad = sa_table(4, {record(1, master), record(0x1234, kStandbySmInfo)});
  auto records = decode_sm_info_records(mad.data(), mad.size());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].lid, 1);
  EXPECT_EQ(records[0].info.guid, 0x0002c90300a1b201ull);
  EXPECT_EQ(records[0].info.activity_count, 0x12399u);
  EXPECT_EQ(records[0].info.priority, 10);
  EXPECT_EQ(records[0].info.state, kMaster);
  EXPECT_EQ(records[1].lid, 0x1234);
  EXPECT_EQ(records[1].info, decode_sm_info(kStandbySmInfo.data()));
}

TEST(SmInfoRecordDecode, EmptyTableAndTruncatedAnswers) {
  auto empty = sa_table(0, {});
  EXPECT_TRUE(decode_sm_info_records(empty.data(), empty.size()).empty());
  // A record that does not fit in what arrived is left out.
  auto mad = sa_table(4, {record(1, kStandbySmInfo), record(2, kStandbySmInfo)});
  EXPECT_EQ(decode_sm_info_records(mad.data(), IB_SA_DATA_OFFS + 32 + 20).size(), 1u);
  EXPECT_TRUE(decode_sm_info_records(mad.data(), 40).empty());
  EXPECT_TRUE(decode_sm_info_records(nullptr, 0).empty());
  // A record size too small to hold SMInfo is not a table of SMInfoRecords.
  auto odd = sa_table(2, {record(1, kStandbySmInfo)});
  EXPECT_TRUE(decode_sm_info_records(odd.data(), odd.size()).empty());
}

SmInfo master(std::uint64_t guid, std::uint32_t count) { return SmInfo{guid, count, 10, kMaster}; }

TEST(MasterTracker, MovingCountIsNotStalled) {
  MasterTracker t;
  for (std::uint32_t c : {100u, 103u, 110u, 111u}) {
    t.observe(master(1, c));
    EXPECT_EQ(t.stalled_polls(), 0u);
  }
  EXPECT_EQ(t.master_changes(), 0u);
}

TEST(MasterTracker, SameCountGrowsStallAndMovingResetsIt) {
  MasterTracker t;
  t.observe(master(1, 50));
  t.observe(master(1, 50));
  t.observe(master(1, 50));
  EXPECT_EQ(t.stalled_polls(), 2u);
  t.observe(master(1, 51));
  EXPECT_EQ(t.stalled_polls(), 0u);
}

TEST(MasterTracker, NoAnswerCountsAsStalledOnceAMasterWasSeen) {
  MasterTracker t;
  t.observe(std::nullopt);  // nothing seen yet: nothing can stall
  EXPECT_EQ(t.stalled_polls(), 0u);
  t.observe(master(1, 7));
  t.observe(std::nullopt);
  t.observe(std::nullopt);
  t.observe(SmInfo{1, 9, 10, kStandby});  // the port's SM is not master: no master activity
  EXPECT_EQ(t.stalled_polls(), 3u);
  // It comes back with the same count: still stalled; then it moves.
  t.observe(master(1, 7));
  EXPECT_EQ(t.stalled_polls(), 4u);
  t.observe(master(1, 8));
  EXPECT_EQ(t.stalled_polls(), 0u);
  EXPECT_EQ(t.master_changes(), 0u);
}

TEST(MasterTracker, FailoverCountsOnceAndResetsStall) {
  MasterTracker t;
  t.observe(master(0x100001, 10));  // first master: not a change
  EXPECT_EQ(t.master_changes(), 0u);
  t.observe(std::nullopt);  // master died
  t.observe(std::nullopt);
  EXPECT_EQ(t.stalled_polls(), 2u);
  t.observe(master(0x100007, 300));  // the standby took over
  EXPECT_EQ(t.master_changes(), 1u);
  EXPECT_EQ(t.stalled_polls(), 0u);
  t.observe(master(0x100007, 305));
  EXPECT_EQ(t.master_changes(), 1u);
  // The old master comes back and takes over again (handover): another change.
  t.observe(master(0x100001, 5));
  EXPECT_EQ(t.master_changes(), 2u);
  ASSERT_TRUE(t.last_master());
  EXPECT_EQ(t.last_master()->guid, 0x100001u);
}

TEST(MasterTracker, ActivityCountRestartingIsMovement) {
  MasterTracker t;
  t.observe(master(1, 0xffffffff));
  t.observe(master(1, 3));  // wrapped, or the SM restarted with the same GUID
  EXPECT_EQ(t.stalled_polls(), 0u);
  EXPECT_EQ(t.master_changes(), 0u);
}

}  // namespace
}  // namespace ibfabric::sm
