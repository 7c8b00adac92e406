#include "collectors/sysfs/attribute_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ibfabric::sysfs {
namespace {

namespace fs = std::filesystem;

class AttributeReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ibfabric-attr-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;  // in place, as the kernel's attribute stays one file
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(AttributeReaderTest, RereadsAKeptFileFromItsStart) {
  AttributeReader reader(16);
  auto path = write("port_xmit_data", "1000\n");
  EXPECT_EQ(reader.read(path).text, "1000\n");
  EXPECT_EQ(reader.open_count(), 1u);
  write("port_xmit_data", "2\n");  // shorter than before: no stale tail
  EXPECT_EQ(reader.read(path).text, "2\n");
  EXPECT_EQ(reader.open_count(), 1u);
}

TEST_F(AttributeReaderTest, MissingFilesReportErrnoAndAreNotKept) {
  AttributeReader reader(16);
  auto result = reader.read((dir_ / "absent").string());
  EXPECT_EQ(result.error, ENOENT);
  EXPECT_EQ(reader.open_count(), 0u);
}

TEST_F(AttributeReaderTest, FilesNotReadInACollectionAreClosed) {
  AttributeReader reader(16);
  auto a = write("a", "1\n");
  auto b = write("b", "2\n");
  reader.read(a);
  reader.read(b);
  reader.close_unused();  // both used in this pass
  EXPECT_EQ(reader.open_count(), 2u);
  reader.read(a);
  reader.close_unused();  // b was not read: closed
  EXPECT_EQ(reader.open_count(), 1u);
  EXPECT_EQ(reader.read(b).text, "2\n");  // and read again when asked
}

TEST_F(AttributeReaderTest, KeepsAtMostMaxOpen) {
  AttributeReader reader(2);
  for (int i = 0; i < 5; ++i) {
    auto path = write("f" + std::to_string(i), std::to_string(i) + "\n");
    EXPECT_EQ(reader.read(path).text, std::to_string(i) + "\n");
  }
  EXPECT_EQ(reader.open_count(), 2u);
}

TEST_F(AttributeReaderTest, ADirectoryIsAnErrorNotACrash) {
  AttributeReader reader(16);
  fs::create_directories(dir_ / "sub");
  EXPECT_EQ(reader.read((dir_ / "sub").string()).error, EISDIR);
  EXPECT_EQ(reader.open_count(), 0u);
}

}  // namespace
}  // namespace ibfabric::sysfs
