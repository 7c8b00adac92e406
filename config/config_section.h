#pragma once
// Strict reading of one YAML mapping: every key must be read by its owner, every value must
// have the expected type, and every error names file:line:column and what was expected.

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ibfabric {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "15s", "500ms", "2m", "1h", "1m30s", "250us". Returns nullopt when `text` is not a duration.
std::optional<std::chrono::nanoseconds> parse_duration(const std::string& text);
std::string format_duration(std::chrono::nanoseconds d);

// YAML::Load with the error as "source:line:column: not valid YAML: ..." (ConfigError).
YAML::Node parse_yaml(const std::string& text, const std::string& source);
// The whole file; a missing or unreadable file is a ConfigError that names `flag`.
std::string read_config_file(const std::string& path, const std::string& flag);

class ConfigSection {
 public:
  // While one is alive, records every key that a ConfigSection on its thread reads or asks about
  // (has), by its dotted path with list entries as [] ("collectors.probe.targets[].address"):
  // what the code accepts, learnt from the code itself, so that a test can hold the documented
  // keys to it (tests/unit/config_keys_test.cpp). The daemon makes none. One at a time per thread.
  class KeyRecorder {
   public:
    enum class Kind { value, mapping, list_of_mappings };
    KeyRecorder();
    ~KeyRecorder();
    KeyRecorder(const KeyRecorder&) = delete;
    KeyRecorder& operator=(const KeyRecorder&) = delete;
    // Every key recorded and how it was read: a mapping's own keys are recorded under it; a list
    // of mappings records its entries' keys only when the file gives it an entry.
    const std::map<std::string, Kind>& keys() const { return keys_; }
    // The default each scalar key was read with, as its docs row writes it: true/false,
    // integers in decimal, numbers as %g, durations as format_duration, strings as they are
    // (tests/unit/config_keys_test.cpp holds docs/configuration.md to them).
    const std::map<std::string, std::string>& defaults() const { return defaults_; }
    // The range each integer, number and duration key was read with (a duration's is its
    // minimum, in nanoseconds; the ceilings some durations have are checked by their readers).
    struct Range {
      enum class Type { integer, number, duration } type;
      double min, max;
    };
    const std::map<std::string, Range>& ranges() const { return ranges_; }

   private:
    friend class ConfigSection;
    std::map<std::string, Kind> keys_;
    std::map<std::string, std::string> defaults_;
    std::map<std::string, Range> ranges_;
  };

  // `path` is the dotted key path of this mapping ("collectors.sysfs"), for messages.
  ConfigSection(YAML::Node node, std::string file, std::string path);

  bool has(const std::string& key) const;

  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::int64_t get_int(const std::string& key, std::int64_t fallback, std::int64_t min,
                       std::int64_t max);
  double get_double(const std::string& key, double fallback, double min, double max);
  std::chrono::nanoseconds get_duration(const std::string& key, std::chrono::nanoseconds fallback,
                                        std::chrono::nanoseconds min = std::chrono::nanoseconds{1});
  // `allowed` lists the accepted values; the error message lists them.
  std::string get_enum(const std::string& key, const std::string& fallback,
                       const std::vector<std::string>& allowed);
  std::vector<std::string> get_string_list(const std::string& key);
  // A nested mapping; nullopt when the key is absent. Read it fully and call finish() on it.
  std::optional<ConfigSection> get_section(const std::string& key);
  // A list of mappings (e.g. probe targets).
  std::vector<ConfigSection> get_section_list(const std::string& key);
  // The keys of this mapping, in file order (for mappings keyed by name).
  std::vector<std::string> keys() const;

  // Throws for every key nobody read: "unknown key". Call once all keys have been read.
  void finish() const;

  // Throws a ConfigError located at `key`'s value (or at this mapping if the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // Throws a ConfigError located at `key` itself rather than its value.
  [[noreturn]] void fail_key(const std::string& key, const std::string& message) const;
  [[noreturn]] void fail_at(const YAML::Node& node, const std::string& key_path,
                            const std::string& message) const;

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  const YAML::Node& node() const { return node_; }

 private:
  std::optional<YAML::Node> take(const std::string& key,
                                 KeyRecorder::Kind kind = KeyRecorder::Kind::value);
  // For the KeyRecorder alive on this thread, if any: the key, and the default it was read with.
  void record(const std::string& key, KeyRecorder::Kind kind) const;
  void record_default(const std::string& key, std::string text) const;
  void record_range(const std::string& key, KeyRecorder::Range range) const;
  std::string recorded_path(const std::string& key) const;
  std::string key_path(const std::string& key) const;
  std::string scalar(const YAML::Node& value, const std::string& key, const char* expected) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<std::set<std::string>> read_keys_;
};

}  // namespace ibfabric
