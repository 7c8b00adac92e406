// Config keys are declared once, by the code that reads them (the get_*("key", ...) calls of
// config/config.cpp, mad/engine_config.cpp and each collector's spec). This test learns them
// from that code with a ConfigSection::KeyRecorder and holds docs/configuration.md to them:
// every key the code accepts has a row in one of its key tables, and every row names a key the
// code accepts; the defaults and ranges the rows give are the ones the code reads keys with.
//
// docs/configuration.md's form: a key table is a table whose header's first cell is `key`; each
// row's first cell is one key in backticks, dotted from the top of the file, list entries as
// `[]` (`collectors.probe.targets[].address`); `NAME` stands for every registered collector
// (`collectors.NAME.enabled`). Mappings (`web`, `collectors.probe`) have no row of their own:
// their keys do. A list of mappings has one, and so does each key of its entries.

#include "collectors/registry.h"
#include "config/config.h"
#include "config/config_section.h"
#include "mad/engine.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ibfabric {
namespace {

using Kind = ConfigSection::KeyRecorder::Kind;

// Every section present, and one entry in each list of mappings, so that the keys of its
// entries are read too (the test below fails, naming the list, when one has none here).
constexpr const char* kConfig = R"(
web: {}
mad: {}
transmit_wait_ticks:
  - {vendor_id: 0x2c9, device_id: 0x1021, bytes: 8}
collectors:
  probe:
    targets:
      - {address: "192.0.2.1:10917"}
  pods:
    rdma_shared_resources:
      - {resource: rdma/hca_shared_devices_a, devices: [mlx5_0]}
)";

struct Recorded {
  std::map<std::string, Kind> keys;
  std::map<std::string, std::string> defaults;
  std::map<std::string, ConfigSection::KeyRecorder::Range> ranges;
};

// The keys the code reads: the top level, `web`, `mad` (parsed by the MAD engine's parser, as the
// daemon does), and every registered collector's section, built by its factory as
// --check-config builds it (factories touch no device); with the defaults it reads them with.
Recorded accepted_keys() {
  ConfigSection::KeyRecorder recorder;
  DaemonConfig config = parse_config(kConfig, "keys.yaml", collector_defaults());
  EXPECT_TRUE(config.mad);
  if (config.mad) mad::parse_engine_config(*config.mad);
  boost::asio::io_context io;
  CollectorContext context{io, "/nonexistent", {}};
  for (auto& collector : config.collectors) {
    const CollectorSpec* spec = find_collector_spec(collector.name);
    EXPECT_TRUE(spec) << collector.name;
    if (spec) spec->create(context, collector.section);
  }
  return {recorder.keys(), recorder.defaults(), recorder.ranges()};
}

std::string trim(const std::string& text) {
  auto begin = text.find_first_not_of(' ');
  auto end = text.find_last_not_of(' ');
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

// A table row's cells ("\|" is a pipe inside a cell).
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      out.push_back(trim(cell));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return out;
}

struct Row {
  std::string key, default_cell;
  int line = 0;
  std::string type_cell;
};

// Every row of docs/configuration.md's key tables (key, its default cell); `problems` gets the
// rows whose first cell is not one key in backticks.
std::vector<Row> documented_rows(std::vector<std::string>& problems) {
  std::ifstream in(IBFABRIC_SOURCE_DIR "/docs/configuration.md");
  EXPECT_TRUE(in) << "cannot read docs/configuration.md";
  std::vector<Row> keys;
  bool in_table = false;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.starts_with("|")) {
      in_table = false;
      continue;
    }
    auto end = line.find('|', 1);
    std::string first = trim(line.substr(1, end == std::string::npos ? end : end - 1));
    if (first == "key") {
      in_table = true;
      continue;
    }
    if (!in_table || first.starts_with("---")) continue;
    if (first.size() < 3 || first.front() != '`' || first.back() != '`' ||
        first.find('`', 1) != first.size() - 1) {
      problems.push_back("docs/configuration.md:" + std::to_string(number) +
                         ": a key table's row must start with one key in backticks: " + first);
      continue;
    }
    auto row = cells(line);
    keys.push_back({first.substr(1, first.size() - 2), row.size() > 2 ? row[2] : "", number,
                    row.size() > 1 ? row[1] : ""});
  }
  return keys;
}

std::string lines(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += "\n  " + key;
  return out;
}

TEST(ConfigKeys, EveryKeyTheCodeAcceptsIsDocumentedAndNoDocumentedKeyIsUnknown) {
  auto recorded = accepted_keys().keys;
  std::set<std::string> accepted;
  for (const auto& [key, kind] : recorded) {
    if (kind != Kind::mapping) accepted.insert(key);
    if (kind == Kind::list_of_mappings) {
      // A copy: clang before 16 does not let a lambda capture a structured binding.
      const std::string prefix = key + "[].";
      bool read = std::any_of(recorded.begin(), recorded.end(),
                              [&](const auto& entry) { return entry.first.starts_with(prefix); });
      EXPECT_TRUE(read) << key << " is a list of mappings, but no key of its entries was read: "
                        << "give it one entry in this test's kConfig";
    }
  }
  // What the test must see, or it would hold the documentation to nothing.
  for (const char* key : {"log_level", "web.idle_timeout", "mad.reopen_backoff_max",
                          "collectors.sysfs.enabled", "collectors.probe.targets",
                          "collectors.probe.targets[].address", "collectors.paths.max_hops"}) {
    EXPECT_TRUE(accepted.count(key)) << "not recorded: " << key;
  }

  std::vector<std::string> problems;
  std::set<std::string> documented;
  for (const auto& [key, default_cell, line, type_cell] : documented_rows(problems)) {
    if (auto at = key.find("NAME"); at != std::string::npos) {
      for (const auto& spec : collector_specs()) {
        documented.insert(key.substr(0, at) + std::string(spec.name) + key.substr(at + 4));
      }
    } else if (!documented.insert(key).second) {
      problems.push_back("docs/configuration.md: " + key + " has two rows");
    }
  }
  EXPECT_TRUE(problems.empty()) << lines({problems.begin(), problems.end()});

  std::set<std::string> undocumented, unknown;
  std::set_difference(accepted.begin(), accepted.end(), documented.begin(), documented.end(),
                      std::inserter(undocumented, undocumented.end()));
  std::set_difference(documented.begin(), documented.end(), accepted.begin(), accepted.end(),
                      std::inserter(unknown, unknown.end()));
  EXPECT_TRUE(undocumented.empty())
      << "keys the code accepts without a row in docs/configuration.md's key tables:"
      << lines(undocumented);
  EXPECT_TRUE(unknown.empty())
      << "keys documented in docs/configuration.md that the code does not read:" << lines(unknown);
}

// Whether the docs' literal default (`500ms`, `64`, `true`, `""`) is the code's (as the
// recorder writes it): durations and numbers compared as values.
bool same_default(const std::string& code, const std::string& docs) {
  if (docs == "\"\"") return code.empty();
  auto code_duration = parse_duration(code), docs_duration = parse_duration(docs);
  if (code_duration && docs_duration) return *code_duration == *docs_duration;
  char* end_code = nullptr;
  char* end_docs = nullptr;
  double a = std::strtod(code.c_str(), &end_code), b = std::strtod(docs.c_str(), &end_docs);
  if (!code.empty() && !docs.empty() && *end_code == 0 && *end_docs == 0) return a == b;
  return code == docs;
}

// A default is written once, in the code that reads the key: docs/configuration.md's default
// column, where it is one literal in backticks, must be that default. (A cell in words, "none",
// "per collector", "every device", is not compared.)
TEST(ConfigKeys, EveryLiteralDefaultInTheDocsIsTheCodes) {
  const auto defaults = accepted_keys().defaults;
  std::vector<std::string> problems;
  const auto rows = documented_rows(problems);
  std::set<std::string> wrong;
  int compared = 0;
  for (const auto& [key, cell, line, type_cell] : rows) {
    if (cell.size() < 2 || cell.front() != '`' || cell.back() != '`' ||
        cell.find('`', 1) != cell.size() - 1) {
      continue;
    }
    auto it = defaults.find(key);
    if (it == defaults.end()) continue;  // a list, a mapping: no scalar default
    ++compared;
    const std::string literal = cell.substr(1, cell.size() - 2);
    if (!same_default(it->second, literal)) {
      wrong.insert("docs/configuration.md:" + std::to_string(line) + ": " + key +
                   ": the docs say `" + literal + "`, the code reads it with " + it->second);
    }
  }
  // Enough rows compared that the test holds the docs to something.
  EXPECT_GE(compared, 40);
  EXPECT_TRUE(wrong.empty()) << lines(wrong);
}

// A bound as the docs write one ("254", "0xffff", "1e9", "0.001"); nullopt otherwise.
std::optional<double> docs_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);  // hexadecimal too
  if (*end != 0) return std::nullopt;
  return value;
}

// A documented range is the one the code reads the key with: `int, 0-254`, `number,
// 0.001-1000000`, `duration, at least 10ms`, `duration, 0 or more`, `duration, 1ms-10s` (a
// duration's lower bound: its ceiling, where it has one, is its reader's own check). A key the
// code reads with a range documents one. A bound named after another key (`1 to
// `max_connections``, `at least `reopen_backoff``) is its reader's check and is not compared.
TEST(ConfigKeys, EveryDocumentedRangeIsTheCodes) {
  using Range = ConfigSection::KeyRecorder::Range;
  const auto ranges = accepted_keys().ranges;
  std::vector<std::string> problems;
  std::set<std::string> wrong;
  int compared = 0;
  for (const auto& [key, default_cell, line, type_cell] : documented_rows(problems)) {
    auto it = ranges.find(key);
    if (it == ranges.end()) continue;
    const Range& range = it->second;
    const std::string where = "docs/configuration.md:" + std::to_string(line) + ": " + key + ": ";
    const std::string type = range.type == Range::Type::integer  ? "int"
                             : range.type == Range::Type::number ? "number"
                                                                 : "duration";
    if (type_cell == type) {
      // No bound written: only a duration may go without one, when any positive one will do.
      if (range.type != Range::Type::duration || range.min != 1) {
        wrong.insert(where + "the code reads it with a range, the docs give none");
      }
      ++compared;
      continue;
    }
    if (!type_cell.starts_with(type + ", ")) {
      wrong.insert(where + "the docs' type is \"" + type_cell + "\", the code reads a " + type);
      continue;
    }
    std::string bound = type_cell.substr(type.size() + 2);
    bound = bound.substr(0, bound.find(','));
    if (bound.find('`') != std::string::npos) continue;
    ++compared;
    std::ostringstream code;
    if (range.type == Range::Type::duration) {
      std::optional<std::chrono::nanoseconds> min;
      if (bound == "0 or more") {
        min = std::chrono::nanoseconds{0};
      } else if (bound.starts_with("at least ")) {
        min = parse_duration(bound.substr(9));
      } else if (auto dash = bound.find('-'); dash != std::string::npos) {
        min = parse_duration(bound.substr(0, dash));
      }
      if (!min || static_cast<double>(min->count()) != range.min) {
        wrong.insert(where + "the docs say \"" + bound + "\", the code's minimum is " +
                     format_duration(std::chrono::nanoseconds{
                         static_cast<std::chrono::nanoseconds::rep>(range.min)}));
      }
      continue;
    }
    auto dash = bound.find('-', 1);
    auto low = docs_number(bound.substr(0, dash));
    auto high = dash == std::string::npos ? std::nullopt : docs_number(bound.substr(dash + 1));
    if (!low || !high || *low != range.min || *high != range.max) {
      code << range.min << "-" << range.max;
      wrong.insert(where + "the docs say \"" + bound + "\", the code reads " + code.str());
    }
  }
  EXPECT_GE(compared, 25);
  EXPECT_TRUE(wrong.empty()) << lines(wrong);
}

// Every scalar of `node` under `path`, dotted as the recorder writes keys.
void scalars(const YAML::Node& node, const std::string& path,
             std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      scalars(entry.second, path.empty() ? key : path + "." + key, out);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) scalars(item, path + "[]", out);
  } else if (node.IsScalar()) {
    out[path] = node.Scalar();
  }
}

// config/ibfabricd.example.yaml says "the values shown are the defaults": each value it sets
// (outside a list: list entries are examples) is the code's default for that key.
TEST(ConfigKeys, TheExampleConfigShowsTheCodesDefaults) {
  const auto defaults = accepted_keys().defaults;
  std::map<std::string, std::string> shown;
  scalars(YAML::LoadFile(IBFABRIC_SOURCE_DIR "/config/ibfabricd.example.yaml"), "", shown);
  std::set<std::string> wrong;
  int compared = 0;
  for (const auto& [key, value] : shown) {
    if (key.find("[]") != std::string::npos) continue;
    auto it = defaults.find(key);
    if (it == defaults.end()) {
      wrong.insert(key + ": the example sets it, the code reads no such key with a default");
      continue;
    }
    ++compared;
    if (!same_default(it->second, value)) {
      wrong.insert(key + ": the example shows " + value + ", the code's default is " + it->second);
    }
  }
  EXPECT_GE(compared, 30);
  EXPECT_TRUE(wrong.empty()) << lines(wrong);
}

TEST(ConfigKeys, TheRecorderRecordsWhatItsThreadReadsOrAsksAboutWithListEntriesAsBrackets) {
  auto node = YAML::Load("a: 1\nlist: [{x: 1}, {x: 2, y: 3}]\nsub: {z: true}\n");
  {
    ConfigSection section(node, "t.yaml", "top");
    section.get_int("a", 0, 0, 9);  // nothing recorded without a recorder
  }
  ConfigSection::KeyRecorder recorder;
  EXPECT_THROW(ConfigSection::KeyRecorder second, std::logic_error);
  ConfigSection section(node, "t.yaml", "top");
  section.get_int("a", 0, 0, 9);
  for (auto& entry : section.get_section_list("list")) {
    entry.get_int("x", 0, 0, 9);
    if (entry.has("y")) entry.get_int("y", 0, 0, 9);
  }
  section.get_section("sub")->get_bool("z", false);
  (void)section.has("absent");
  EXPECT_EQ(recorder.keys(), (std::map<std::string, Kind>{{"top.a", Kind::value},
                                                          {"top.absent", Kind::value},
                                                          {"top.list", Kind::list_of_mappings},
                                                          {"top.list[].x", Kind::value},
                                                          {"top.list[].y", Kind::value},
                                                          {"top.sub", Kind::mapping},
                                                          {"top.sub.z", Kind::value}}));
}

}  // namespace
}  // namespace ibfabric
