#include "config/config_section.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ibfabric {

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::ostringstream out;
    out << source << ':' << e.mark.line + 1 << ':' << e.mark.column + 1
        << ": not valid YAML: " << e.msg;
    throw ConfigError(out.str());
  }
}

std::string read_config_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) {
    throw ConfigError(path + ": cannot read the file (" + std::strerror(errno) +
                      "); check the path given with " + flag);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

std::string location(const std::string& file, const YAML::Mark& mark) {
  std::ostringstream out;
  out << file;
  if (mark.line >= 0) out << ':' << mark.line + 1 << ':' << mark.column + 1;
  return out.str();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

}  // namespace

std::optional<std::chrono::nanoseconds> parse_duration(const std::string& text) {
  using namespace std::chrono;
  if (text.empty()) return std::nullopt;
  // Units longest first so "ms" is not read as "m" followed by "s".
  static const std::pair<std::string_view, double> kUnits[] = {
      {"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"h", 3600e9}, {"m", 60e9}, {"s", 1e9}};
  double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (i == start) return std::nullopt;
    double number = 0;
    auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + i, number);
    if (ec != std::errc() || ptr != text.data() + i) return std::nullopt;
    bool matched = false;
    for (const auto& [unit, scale] : kUnits) {
      if (text.compare(i, unit.size(), unit) == 0) {
        total += number * scale;
        i += unit.size();
        matched = true;
        break;
      }
    }
    if (!matched) return std::nullopt;
  }
  if (!std::isfinite(total) || total > 1e18) return std::nullopt;
  return nanoseconds(static_cast<std::int64_t>(std::llround(total)));
}

std::string format_duration(std::chrono::nanoseconds d) {
  auto ns = d.count();
  std::ostringstream out;
  if (ns % 1'000'000'000 == 0) {
    out << ns / 1'000'000'000 << 's';
  } else if (ns % 1'000'000 == 0) {
    out << ns / 1'000'000 << "ms";
  } else if (ns % 1'000 == 0) {
    out << ns / 1'000 << "us";
  } else {
    out << ns << "ns";
  }
  return out.str();
}

ConfigSection::ConfigSection(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)),
      file_(std::move(file)),
      path_(std::move(path)),
      read_keys_(std::make_shared<std::set<std::string>>()) {
  if (node_.IsNull()) return;  // "sysfs:" with nothing under it: all defaults
  if (!node_.IsMap()) {
    throw ConfigError(location(file_, node_.Mark()) + ": " + (path_.empty() ? "the file" : path_) +
                      ": expected a mapping of key: value");
  }
}

std::string ConfigSection::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

namespace {

// The KeyRecorder alive on this thread; nullptr in the daemon.
thread_local ConfigSection::KeyRecorder* recorder = nullptr;

}  // namespace

ConfigSection::KeyRecorder::KeyRecorder() {
  if (recorder) throw std::logic_error("a KeyRecorder is already recording on this thread");
  recorder = this;
}

ConfigSection::KeyRecorder::~KeyRecorder() { recorder = nullptr; }

// "collectors.probe.targets[0].name" -> "collectors.probe.targets[].name": one key for all.
std::string ConfigSection::recorded_path(const std::string& key) const {
  const std::string full = key_path(key);
  std::string path;
  for (std::size_t i = 0; i < full.size(); ++i) {
    path += full[i];
    if (full[i] != '[') continue;
    while (i + 1 < full.size() && std::isdigit(static_cast<unsigned char>(full[i + 1]))) ++i;
  }
  return path;
}

void ConfigSection::record_default(const std::string& key, std::string text) const {
  if (recorder) recorder->defaults_[recorded_path(key)] = std::move(text);
}

void ConfigSection::record_range(const std::string& key, KeyRecorder::Range range) const {
  if (recorder) recorder->ranges_[recorded_path(key)] = range;
}

void ConfigSection::record(const std::string& key, KeyRecorder::Kind kind) const {
  if (!recorder) return;
  auto it = recorder->keys_.emplace(recorded_path(key), kind).first;
  if (kind != KeyRecorder::Kind::value) it->second = kind;  // has() first, then get_section()
}

bool ConfigSection::has(const std::string& key) const {
  record(key, KeyRecorder::Kind::value);
  return node_.IsMap() && node_[key].IsDefined();
}

std::optional<YAML::Node> ConfigSection::take(const std::string& key, KeyRecorder::Kind kind) {
  read_keys_->insert(key);
  record(key, kind);
  if (!node_.IsMap()) return std::nullopt;
  YAML::Node value = node_[key];
  if (!value.IsDefined()) return std::nullopt;
  return value;
}

void ConfigSection::fail_at(const YAML::Node& node, const std::string& key_path,
                            const std::string& message) const {
  throw ConfigError(location(file_, node.Mark()) + ": " + key_path + ": " + message);
}

void ConfigSection::fail(const std::string& key, const std::string& message) const {
  if (node_.IsMap() && node_[key].IsDefined()) fail_at(node_[key], key_path(key), message);
  fail_at(node_, key_path(key), message);
}

void ConfigSection::fail_key(const std::string& key, const std::string& message) const {
  if (node_.IsMap()) {
    for (const auto& entry : node_) {
      if (entry.first.Scalar() == key) fail_at(entry.first, key_path(key), message);
    }
  }
  fail(key, message);
}

std::string ConfigSection::scalar(const YAML::Node& value, const std::string& key,
                                  const char* expected) const {
  if (!value.IsScalar()) {
    fail_at(value, key_path(key),
            std::string("expected ") + expected + ", got a " +
                (value.IsMap()        ? "mapping"
                 : value.IsSequence() ? "list"
                                      : "null"));
  }
  return value.Scalar();
}

bool ConfigSection::get_bool(const std::string& key, bool fallback) {
  record_default(key, fallback ? "true" : "false");
  auto value = take(key);
  if (!value) return fallback;
  std::string text = scalar(*value, key, "true or false");
  if (text == "true") return true;
  if (text == "false") return false;
  fail_at(*value, key_path(key), "expected true or false, got \"" + text + "\"");
}

std::string ConfigSection::get_string(const std::string& key, const std::string& fallback) {
  record_default(key, fallback);
  auto value = take(key);
  if (!value) return fallback;
  return scalar(*value, key, "a string");
}

std::int64_t ConfigSection::get_int(const std::string& key, std::int64_t fallback, std::int64_t min,
                                    std::int64_t max) {
  record_default(key, std::to_string(fallback));
  record_range(
      key, {KeyRecorder::Range::Type::integer, static_cast<double>(min), static_cast<double>(max)});
  auto value = take(key);
  if (!value) return fallback;
  std::string text = scalar(*value, key, "an integer");
  std::int64_t number = 0;
  int base = 10;
  std::string_view digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number, base);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    fail_at(*value, key_path(key), "expected an integer, got \"" + text + "\"");
  }
  if (number < min || number > max) {
    fail_at(*value, key_path(key),
            "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                ", got " + text);
  }
  return number;
}

double ConfigSection::get_double(const std::string& key, double fallback, double min, double max) {
  if (recorder) {
    std::ostringstream text;
    text << fallback;  // %g
    record_default(key, text.str());
  }
  record_range(key, {KeyRecorder::Range::Type::number, min, max});
  auto value = take(key);
  if (!value) return fallback;
  std::string text = scalar(*value, key, "a number");
  double number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      !std::isfinite(number)) {
    fail_at(*value, key_path(key), "expected a number, got \"" + text + "\"");
  }
  if (number < min || number > max) {
    std::ostringstream range;
    range << "expected a number from " << min << " to " << max << ", got " << text;
    fail_at(*value, key_path(key), range.str());
  }
  return number;
}

std::chrono::nanoseconds ConfigSection::get_duration(const std::string& key,
                                                     std::chrono::nanoseconds fallback,
                                                     std::chrono::nanoseconds min) {
  record_default(key, format_duration(fallback));
  record_range(key, {KeyRecorder::Range::Type::duration, static_cast<double>(min.count()), 0});
  auto value = take(key);
  if (!value) return fallback;
  std::string text = scalar(*value, key, "a duration such as 15s or 500ms");
  auto parsed = parse_duration(text);
  if (!parsed) {
    fail_at(*value, key_path(key),
            "expected a duration such as 15s, 500ms or 1m30s (units h, m, s, ms, us, ns), got \"" +
                text + "\"");
  }
  if (*parsed < min) {
    fail_at(*value, key_path(key), "must be at least " + format_duration(min) + ", got " + text);
  }
  return *parsed;
}

std::string ConfigSection::get_enum(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  record_default(key, fallback);
  auto value = take(key);
  if (!value) return fallback;
  std::string expected = "one of: " + join(allowed);
  std::string text = scalar(*value, key, expected.c_str());
  if (std::find(allowed.begin(), allowed.end(), text) == allowed.end()) {
    fail_at(*value, key_path(key), "expected one of: " + join(allowed) + "; got \"" + text + "\"");
  }
  return text;
}

std::vector<std::string> ConfigSection::get_string_list(const std::string& key) {
  auto value = take(key);
  if (!value || value->IsNull()) return {};
  if (!value->IsSequence()) fail_at(*value, key_path(key), "expected a list of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    const YAML::Node item = (*value)[i];
    out.push_back(scalar(item, key + "[" + std::to_string(i) + "]", "a string"));
  }
  return out;
}

std::optional<ConfigSection> ConfigSection::get_section(const std::string& key) {
  auto value = take(key, KeyRecorder::Kind::mapping);
  if (!value) return std::nullopt;
  return ConfigSection(*value, file_, key_path(key));
}

std::vector<ConfigSection> ConfigSection::get_section_list(const std::string& key) {
  auto value = take(key, KeyRecorder::Kind::list_of_mappings);
  if (!value || value->IsNull()) return {};
  if (!value->IsSequence()) fail_at(*value, key_path(key), "expected a list");
  std::vector<ConfigSection> out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    out.emplace_back((*value)[i], file_, key_path(key) + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::vector<std::string> ConfigSection::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (const auto& entry : node_) out.push_back(entry.first.Scalar());
  return out;
}

void ConfigSection::finish() const {
  if (!node_.IsMap()) return;
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    if (!read_keys_->contains(key)) {
      std::vector<std::string> known(read_keys_->begin(), read_keys_->end());
      throw ConfigError(location(file_, entry.first.Mark()) + ": " + key_path(key) +
                        ": unknown key" +
                        (known.empty() ? std::string(" (this section takes no keys)")
                                       : "; expected one of: " + join(known)));
    }
  }
}

}  // namespace ibfabric
