#include "ib/state_file.h"
#include "ib/state_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ibfabric::state {
namespace {

State sample() {
  State s;
  s.collector = "fabric";
  s.origin = 0x0002c90300000001ull;
  s.saved = 1764064800.25;
  s.links.push_back({0xfe80000000000000ull, "", 0x0002c90200400001ull, 5, 0x0002c90200400002ull, 1,
                     2, 1764064790.0, "leaf-01", "spine-01"});
  s.links.push_back({0xfe80000000000000ull, "", 0x0002c90200400001ull, 1, 0x0002c90300000009ull, 1,
                     1, 1764064791.5, "leaf 01 \"A1\" 100%", ""});
  s.links.push_back({0xfec0000000000001ull, "mlx5_0", 0x0002c90300000009ull, 1,
                     0x0002c90200400001ull, 7, 2, 1764064799.0, "-", "\xc3\xa9t\xc3\xa9\n\ttab"});
  return s;
}

TEST(StateFile, RoundTripsEveryField) {
  auto text = serialize(sample());
  auto parsed = parse(text);
  ASSERT_TRUE(parsed.state) << parsed.error;
  EXPECT_EQ(parsed.error, "");
  EXPECT_EQ(*parsed.state, sample());
  EXPECT_EQ(serialize(*parsed.state), text);
  // One line per record, nothing in a text field breaks the line.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3 + 3 + 1);
}

TEST(StateFile, EscapesSpacesPercentControlBytesAndTheLoneDash) {
  EXPECT_EQ(escape(""), "-");
  EXPECT_EQ(escape("-"), "%2D");
  EXPECT_EQ(escape("a-b"), "a-b");
  EXPECT_EQ(escape("a b%\n"), "a%20b%25%0A");
  EXPECT_EQ(unescape("-"), "");
  EXPECT_EQ(unescape("%2D"), "-");
  EXPECT_EQ(unescape("a%20b%25%0a"), "a b%\n");
  EXPECT_EQ(unescape(""), std::nullopt);
  EXPECT_EQ(unescape("%"), std::nullopt);
  EXPECT_EQ(unescape("%2"), std::nullopt);
  EXPECT_EQ(unescape("%zz"), std::nullopt);
  EXPECT_EQ(unescape("a b"), std::nullopt);
}

TEST(StateFile, EveryTruncationIsRejected) {
  auto text = serialize(sample());
  for (std::size_t n = 0; n < text.size(); ++n) {
    auto parsed = parse(std::string_view(text).substr(0, n));
    EXPECT_FALSE(parsed.state) << "cut at " << n;
    EXPECT_FALSE(parsed.error.empty()) << "cut at " << n;
  }
}

TEST(StateFile, RejectsOtherVersionsGarbageAndBadRecords) {
  auto good = serialize(sample());
  auto with = [&](const std::string& from, const std::string& to) {
    auto text = good;
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return parse(text);
  };
  auto version = with("ibfabric-state 1 ", "ibfabric-state 2 ");
  EXPECT_FALSE(version.state);
  EXPECT_NE(version.error.find("version 2"), std::string::npos) << version.error;
  EXPECT_FALSE(with("ibfabric-state", "ibfabric-stat").state);
  EXPECT_FALSE(with("origin 0x", "origin 0y").state);
  EXPECT_FALSE(with("saved 1764064800.250", "saved -1").state);
  EXPECT_FALSE(with("saved 1764064800.250", "saved nan").state);
  EXPECT_FALSE(with("saved 1764064800.250", "saved 1e300").state);
  EXPECT_FALSE(with("end 3", "end 2").state);
  EXPECT_FALSE(with("end 3", "end 4").state);
  EXPECT_FALSE(with("end 3\n", "end 3\nlink\n").state);
  EXPECT_FALSE(with(" 5 0x0002c90200400002", " 256 0x0002c90200400002").state);
  EXPECT_FALSE(with(" 5 0x0002c90200400002", " -5 0x0002c90200400002").state);
  EXPECT_FALSE(with(" 5 0x0002c90200400002", "  5 0x0002c90200400002").state);
  EXPECT_FALSE(with(" 1 2 1764064790.000", " 1 9 1764064790.000").state);
  EXPECT_FALSE(with("leaf-01 spine-01", "leaf-01 spine-01 extra").state);
  EXPECT_FALSE(with("leaf-01 spine-01", "leaf-01").state);
  EXPECT_FALSE(with("0x0002c90200400002", "0x2c90200400002").state);
  EXPECT_FALSE(with("\nend", "\r\nend").state);
  EXPECT_FALSE(with("link 0xfe80000000000000 -", "link fe80000000000000 -").state);
  EXPECT_FALSE(with("link 0xfe80000000000000 -", "link -").state);
  EXPECT_FALSE(parse("").state);
  EXPECT_FALSE(parse("\n").state);
  EXPECT_FALSE(parse(std::string(1000, '\0')).state);
  EXPECT_FALSE(parse("{\"links\": []}\n").state);
  EXPECT_FALSE(parse("ibfabric-state 1 fabric\n").state);
}

class StateDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/ibfabric-state-test.XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

// Runs the loop until `done()` or 5 s: a write posts its result from a worker thread.
template <class Pred>
void run_until(boost::asio::io_context& io, Pred done, int ticks = 500) {
  for (int i = 0; i < ticks && !done(); ++i) {
    if (io.poll() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    io.restart();
  }
}

double metric(StateStore& store, std::string_view name) {
  MetricsBuilder out;
  store.fill_metrics(out);
  auto families = std::move(out).take();
  for (const auto& f : families) {
    if (f.name == name && !f.samples.empty()) return f.samples.front().value;
  }
  return -1;
}

TEST_F(StateDir, WritesAtomicallyAndReadsBack) {
  EXPECT_EQ(write_atomically(dir_ + "/fabric.state", serialize(sample())), "");
  auto loaded = load(dir_ + "/fabric.state");
  ASSERT_TRUE(loaded.state) << loaded.error;
  EXPECT_EQ(*loaded.state, sample());
  // No temporary file is left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
  // A missing file is a first start, not an error.
  auto missing = load(dir_ + "/ports.state");
  EXPECT_FALSE(missing.state);
  EXPECT_EQ(missing.error, "");
  // A directory that does not exist: the write fails with the reason and nothing else.
  auto error = write_atomically(dir_ + "/no/such/dir/fabric.state", "x");
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
}

TEST_F(StateDir, ABadFileIsIgnoredOnceAndCounted) {
  boost::asio::io_context io;
  static constexpr char kGarbage[] = "garbage\0\x01 not a state\n";
  write("fabric.state", std::string(kGarbage, sizeof kGarbage - 1));
  StateStore store(io, dir_, "fabric");
  EXPECT_FALSE(store.load());
  EXPECT_EQ(metric(store, "ibfabric_state_files_ignored_total"), 1);
  // Another collector's file is not this one's.
  write("ports.state", serialize(sample()));
  StateStore ports(io, dir_, "ports");
  EXPECT_FALSE(ports.load());
  StateStore fabric_again(io, dir_, "fabric");
  write("fabric.state", serialize(sample()));
  EXPECT_TRUE(fabric_again.load());
  // A crash mid-write left a temporary file: the next load removes it, and nothing else.
  write("fabric.state.tmp.123.4", "half a state");
  write("other.file", "x");
  StateStore after_crash(io, dir_, "fabric");
  EXPECT_TRUE(after_crash.load());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/fabric.state.tmp.123.4"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/other.file"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/fabric.state"));
  StateStore off(io, "", "fabric");
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.load());
}

TEST_F(StateDir, SavesOffTheLoopAtABoundedRateAndSurvivesAReadOnlyDirectory) {
  boost::asio::io_context io;
  StateStore store(io, dir_, "fabric");
  store.save(sample());
  run_until(io, [&] { return metric(store, "ibfabric_state_writes_total") == 1; });
  EXPECT_EQ(metric(store, "ibfabric_state_writes_total"), 1);
  auto loaded = load(dir_ + "/fabric.state");
  ASSERT_TRUE(loaded.state) << loaded.error;
  EXPECT_EQ(*loaded.state, sample());
  // A changed state within kMinWriteInterval waits.
  auto changed = sample();
  changed.links.pop_back();
  store.save(changed);
  run_until(
      io, [&] { return metric(store, "ibfabric_state_writes_total") > 1; }, 30);
  EXPECT_EQ(metric(store, "ibfabric_state_writes_total"), 1);
  EXPECT_EQ(load(dir_ + "/fabric.state").state->links.size(), 3u);
  // A directory it cannot write to (unless running as root, which ignores the mode): the
  // write fails, is counted, and nothing else happens.
  if (::geteuid() != 0) {
    ::chmod(dir_.c_str(), 0500);
    StateStore readonly(io, dir_, "ports");
    auto s = sample();
    s.collector = "ports";
    readonly.save(s);
    run_until(io, [&] { return metric(readonly, "ibfabric_state_write_failures_total") == 1; });
    ::chmod(dir_.c_str(), 0700);
    EXPECT_EQ(metric(readonly, "ibfabric_state_write_failures_total"), 1);
  }
  // A read-only file system (/proc refuses new files, also to root): the same.
  StateStore read_only(io, "/proc", "ports");
  {
    auto s = sample();
    s.collector = "ports";
    read_only.save(s);
  }
  run_until(io, [&] { return metric(read_only, "ibfabric_state_write_failures_total") == 1; });
  EXPECT_EQ(metric(read_only, "ibfabric_state_write_failures_total"), 1);
  EXPECT_FALSE(std::filesystem::exists("/proc/ports.state"));
  StateStore missing_dir(io, dir_ + "/gone", "ports");
  auto s = sample();
  s.collector = "ports";
  missing_dir.save(s);
  run_until(io, [&] { return metric(missing_dir, "ibfabric_state_write_failures_total") == 1; });
  EXPECT_EQ(metric(missing_dir, "ibfabric_state_write_failures_total"), 1);
  EXPECT_EQ(metric(missing_dir, "ibfabric_state_writes_total"), 0);
}

}  // namespace
}  // namespace ibfabric::state
