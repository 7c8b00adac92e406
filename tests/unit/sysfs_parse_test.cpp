// The parsers for the kernel's /sys/class/infiniband text, against strings written exactly as
// drivers/infiniband/core/sysfs.c formats them, and against text the kernel never writes.

#include "ib/sysfs_parse.h"

#include <gtest/gtest.h>

namespace ibfabric::sysfs {
namespace {

TEST(SysfsParse, TrimRemovesTheKernelsNewlineAndBlanks) {
  EXPECT_EQ(trim("4: ACTIVE\n"), "4: ACTIVE");
  EXPECT_EQ(trim("  x \t\r\n"), "x");
  EXPECT_EQ(trim("\n"), "");
  EXPECT_EQ(trim(""), "");
}

TEST(SysfsParse, PortStates) {
  // state_show: "%d: %s\n" with NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER.
  const std::pair<const char*, std::uint32_t> states[] = {
      {"0: NOP\n", 0},   {"1: DOWN\n", 1},   {"2: INIT\n", 2},
      {"3: ARMED\n", 3}, {"4: ACTIVE\n", 4}, {"5: ACTIVE_DEFER\n", 5},
  };
  const char* names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  for (std::size_t i = 0; i < std::size(states); ++i) {
    auto parsed = parse_numbered_name(states[i].first);
    ASSERT_TRUE(parsed) << states[i].first;
    EXPECT_EQ(parsed->number, states[i].second);
    EXPECT_EQ(parsed->name, names[i]);
  }
  auto unknown = parse_numbered_name("9: UNKNOWN\n");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->number, 9u);
  EXPECT_EQ(unknown->name, "UNKNOWN");
}

TEST(SysfsParse, PhysicalStatesIncludingNamesWithSpacesAndUnknown) {
  auto up = parse_numbered_name("5: LinkUp\n");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->number, 5u);
  EXPECT_EQ(up->name, "LinkUp");

  auto polling = parse_numbered_name("2: Polling\n");
  ASSERT_TRUE(polling);
  EXPECT_EQ(polling->number, 2u);
  EXPECT_EQ(polling->name, "Polling");

  auto phy_test = parse_numbered_name("7: Phy Test\n");
  ASSERT_TRUE(phy_test);
  EXPECT_EQ(phy_test->number, 7u);
  EXPECT_EQ(phy_test->name, "Phy Test");

  auto training = parse_numbered_name("4: PortConfigurationTraining\n");
  ASSERT_TRUE(training);
  EXPECT_EQ(training->name, "PortConfigurationTraining");

  // phys_state_to_str() falls back to "<unknown>" for values it has no name for.
  auto unknown = parse_numbered_name("12: <unknown>\n");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->number, 12u);
  EXPECT_EQ(unknown->name, "<unknown>");
}

TEST(SysfsParse, NodeType) {
  auto ca = parse_numbered_name("1: CA\n");
  ASSERT_TRUE(ca);
  EXPECT_EQ(ca->number, 1u);
  EXPECT_EQ(ca->name, "CA");
  auto usnic = parse_numbered_name("6: usNIC UDP\n");
  ASSERT_TRUE(usnic);
  EXPECT_EQ(usnic->number, 6u);
  EXPECT_EQ(usnic->name, "usNIC UDP");
}

TEST(SysfsParse, GarbledStatesAreRefused) {
  for (const char* text : {"ACTIVE\n", "", "\n", ": ACTIVE", "4:", "4: \n", "-1: DOWN", "x: DOWN",
                           "4 ACTIVE", "4294967296: BIG", "0x4: ACTIVE"}) {
    EXPECT_FALSE(parse_numbered_name(text)) << '"' << text << '"';
  }
}

TEST(SysfsParse, RatesOfEveryInfiniBandSpeed) {
  struct Case {
    const char* text;
    std::uint64_t bytes_per_second;
    std::uint32_t lanes;
    const char* width;
    const char* speed;
  };
  // rate_show: "%d%s Gb/sec (%dX%s)\n"; 1 Gb/s is 125,000,000 bytes/s.
  const Case cases[] = {
      {"400 Gb/sec (4X NDR)\n", 50'000'000'000, 4, "4X", "NDR"},
      {"200 Gb/sec (4X HDR)\n", 25'000'000'000, 4, "4X", "HDR"},
      {"100 Gb/sec (4X EDR)\n", 12'500'000'000, 4, "4X", "EDR"},
      {"100 Gb/sec (2X HDR)\n", 12'500'000'000, 2, "2X", "HDR"},
      {"56 Gb/sec (4X FDR)\n", 7'000'000'000, 4, "4X", "FDR"},
      {"40 Gb/sec (4X FDR10)\n", 5'000'000'000, 4, "4X", "FDR10"},
      {"40 Gb/sec (4X QDR)\n", 5'000'000'000, 4, "4X", "QDR"},
      {"20 Gb/sec (4X DDR)\n", 2'500'000'000, 4, "4X", "DDR"},
      {"800 Gb/sec (4X XDR)\n", 100'000'000'000, 4, "4X", "XDR"},
      {"1200 Gb/sec (12X NDR)\n", 150'000'000'000, 12, "12X", "NDR"},
      // SDR: older kernels print no speed name, newer ones print " SDR".
      {"10 Gb/sec (4X)\n", 1'250'000'000, 4, "4X", "SDR"},
      {"10 Gb/sec (4X SDR)\n", 1'250'000'000, 4, "4X", "SDR"},
      {"30 Gb/sec (12X)\n", 3'750'000'000, 12, "12X", "SDR"},
      // Half rates: one SDR lane is 2.5 Gb/s. The number is taken as printed, whatever the width.
      {"2.5 Gb/sec (1X)\n", 312'500'000, 1, "1X", "SDR"},
      {"2.5 Gb/sec (1X SDR)\n", 312'500'000, 1, "1X", "SDR"},
      {"12.5 Gb/sec (1X)\n", 1'562'500'000, 1, "1X", "SDR"},
      {"14 Gb/sec (1X FDR)\n", 1'750'000'000, 1, "1X", "FDR"},
  };
  for (const auto& c : cases) {
    auto rate = parse_rate(c.text);
    ASSERT_TRUE(rate) << c.text;
    EXPECT_EQ(rate->bytes_per_second, c.bytes_per_second) << c.text;
    EXPECT_EQ(rate->lanes, c.lanes) << c.text;
    EXPECT_EQ(rate->width, c.width) << c.text;
    EXPECT_EQ(rate->speed, c.speed) << c.text;
  }
}

TEST(SysfsParse, GarbledRatesAreRefused) {
  for (const char* text :
       {"", "\n", "400", "400 Gb/sec", "400 Gb/sec (4X NDR", "400 Gb/s (4X NDR)", "Gb/sec (4X NDR)",
        "400 Gb/sec (X NDR)", "400 Gb/sec (0X NDR)", "400 Gb/sec (4 NDR)", "400 Gb/sec (4XNDR)",
        "400 Gb/sec (4X ndr)", "400 Gb/sec (4X )", "-400 Gb/sec (4X NDR)", ".5 Gb/sec (1X)",
        "2. Gb/sec (1X)", "2.5.5 Gb/sec (1X)", "400 Gb/sec (4X NDR) extra"}) {
    EXPECT_FALSE(parse_rate(text)) << '"' << text << '"';
  }
}

TEST(SysfsParse, Guids) {
  EXPECT_EQ(parse_guid("0c42:a103:0065:ab12\n"), "0x0c42a1030065ab12");
  EXPECT_EQ(parse_guid("0000:0000:0000:0001"), "0x0000000000000001");
  EXPECT_EQ(parse_guid("E41D:2D03:0071:8A40\n"), "0xe41d2d0300718a40");
  for (const char* text :
       {"", "0c42:a103:0065", "0c42:a103:0065:ab12:0000", "0c42a1030065ab12", "0c42:a103:zz65:ab12",
        "0c42-a103-0065-ab12", "c42:a103:0065:ab12", "0x0c42a1030065ab12"}) {
    EXPECT_FALSE(parse_guid(text)) << '"' << text << '"';
  }
}

TEST(SysfsParse, HexLids) {
  EXPECT_EQ(parse_hex("0x1a2\n"), 0x1a2u);
  EXPECT_EQ(parse_hex("0x0\n"), 0u);
  EXPECT_EQ(parse_hex("0xffff\n"), 0xffffu);
  EXPECT_EQ(parse_hex("0xFFFF"), 0xffffu);
  for (const char* text : {"", "0x", "1a2", "418", "0xg", "0x-1", "0x 1", "0x10000000000000000"}) {
    EXPECT_FALSE(parse_hex(text)) << '"' << text << '"';
  }
}

TEST(SysfsParse, Decimals) {
  EXPECT_EQ(parse_decimal("0\n"), 0u);
  EXPECT_EQ(parse_decimal("2\n"), 2u);
  EXPECT_EQ(parse_decimal("15"), 15u);
  for (const char* text : {"", "\n", "-1", "+1", "0x2", "2.0", "two", "1 2"}) {
    EXPECT_FALSE(parse_decimal(text)) << '"' << text << '"';
  }
}

TEST(SysfsParse, CountersUpToTheFullUint64Range) {
  auto zero = parse_counter("0\n");
  EXPECT_EQ(zero.kind, CounterText::Kind::value);
  EXPECT_EQ(zero.value, 0u);

  auto above_32_bits = parse_counter("1234567890123\n");
  EXPECT_EQ(above_32_bits.kind, CounterText::Kind::value);
  EXPECT_EQ(above_32_bits.value, 1234567890123u);

  auto max = parse_counter("18446744073709551615\n");
  EXPECT_EQ(max.kind, CounterText::Kind::value);
  EXPECT_EQ(max.value, 18446744073709551615u);
}

TEST(SysfsParse, NoPmaIsNotSupportedRatherThanGarbled) {
  // show_pma_counter() on older kernels when the PMA query fails.
  EXPECT_EQ(parse_counter("N/A (no PMA)\n").kind, CounterText::Kind::not_supported);
}

TEST(SysfsParse, GarbledCountersAreRefused) {
  for (const char* text : {"", "\n", "twelve", "12abc", "-5", "+5", "1.5", "0x10", "1 2",
                           "18446744073709551616", "99999999999999999999999", "N/A"}) {
    EXPECT_EQ(parse_counter(text).kind, CounterText::Kind::garbled) << '"' << text << '"';
  }
}

TEST(SysfsParse, PrintableEscapesAndShortens) {
  EXPECT_EQ(printable("ACTIVE\n"), "ACTIVE\\n");
  EXPECT_EQ(printable("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(printable(std::string("\x01\xff", 2)), "??");
  EXPECT_EQ(printable(std::string(100, 'x')), std::string(64, 'x') + "...");
}

}  // namespace
}  // namespace ibfabric::sysfs
