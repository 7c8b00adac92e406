#include "core/node_names.h"
#include "config/config_section.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace ibfabric {
namespace {

std::string error_of(const std::string& text) {
  try {
    NodeNameMap::parse(text, "map.txt");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(NodeNameMap, ReadsInfinibandDiagsFormat) {
  auto map = NodeNameMap::parse(
      "# comment\n"
      "\n"
      "0x0002c90300a1b2c3 \"leaf-a01 (rack A1)\"\n"
      "  0X0000000000200001\t\"spine-02\"   # trailing comment\n"
      "1048576 \"decimal-guid\"\n"
      "0x0002c90300a1b2c3 \"second entry of a GUID\"\n",
      "map.txt");
  EXPECT_EQ(map.size(), 3u);
  ASSERT_NE(map.find(0x0002c90300a1b2c3), nullptr);
  EXPECT_EQ(*map.find(0x0002c90300a1b2c3), "leaf-a01 (rack A1)");  // the first entry wins
  EXPECT_EQ(*map.find(0x200001), "spine-02");
  EXPECT_EQ(*map.find(0x100000), "decimal-guid");
  EXPECT_EQ(map.find(0x42), nullptr);
}

TEST(NodeNameMap, NameFallsBackToTheDescriptionThenTheGuid) {
  auto map = NodeNameMap::parse("0x10 \"mapped\"\n", "map.txt");
  EXPECT_EQ(map.name(0x10, "described"), "mapped");
  // NodeDescription is a 64-octet field padded with NULs (or spaces, by some firmware).
  EXPECT_EQ(map.name(0x11, std::string_view("gpu-node-07 mlx5_0\0\0\0", 21)), "gpu-node-07 mlx5_0");
  EXPECT_EQ(map.name(0x11, "  padded   "), "padded");
  EXPECT_EQ(map.name(0x11, ""), "0x0000000000000011");
  EXPECT_EQ(map.name(0x11, std::string_view("\0\0", 2)), "0x0000000000000011");
}

TEST(NodeNameMap, BadLinesNameFileAndLine) {
  auto e = error_of("0x10 \"ok\"\n# fine\nleaf-1 \"no guid\"\n");
  EXPECT_NE(e.find("map.txt:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("no GUID"), std::string::npos) << e;
  EXPECT_NE(e.find("0x<guid> \"name\""), std::string::npos) << e;  // how to fix it
  EXPECT_NE(error_of("0x10 leaf-1\n").find("map.txt:1: the name must follow"), std::string::npos);
  EXPECT_NE(error_of("0x10 \"leaf-1\n").find("closing quote"), std::string::npos);
  EXPECT_NE(error_of("0x10 \"leaf-1\" extra\n").find("unexpected text"), std::string::npos);
  EXPECT_NE(error_of("0x10 \"\"\n").find("empty"), std::string::npos);
  EXPECT_NE(error_of("0x1ffffffffffffffff \"big\"\n").find("64 bits"), std::string::npos);
  EXPECT_NE(error_of("0x10zz \"x\"\n").find("map.txt:1:"), std::string::npos);
}

TEST(NodeNameMap, MissingDefaultFileIsNoErrorButAMissingGivenFileIs) {
  auto missing = std::filesystem::temp_directory_path() / "ibfabric-no-such-map";
  auto map = NodeNameMap::load(missing.string(), true);
  EXPECT_EQ(map->size(), 0u);
  EXPECT_THROW(NodeNameMap::load(missing.string(), false), ConfigError);

  auto path = std::filesystem::temp_directory_path() / "ibfabric-node-name-map-test";
  {
    std::ofstream out(path);
    out << "0x20 \"from-file\"\n";
  }
  EXPECT_EQ(*NodeNameMap::load(path.string(), false)->find(0x20), "from-file");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ibfabric
