#include "core/node_names.h"

#include "config/config_section.h"
#include "core/metrics.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ibfabric {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view skip_blanks(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  return s;
}

[[noreturn]] void bad_line(const std::string& file, int line, const std::string& what) {
  throw ConfigError(file + ":" + std::to_string(line) + ": " + what +
                    "; expected 0x<guid> \"name\" (infiniband-diags node-name-map format)");
}

}  // namespace

std::string trim_node_description(std::string_view description) {
  auto end = description.find('\0');
  if (end != std::string_view::npos) description = description.substr(0, end);
  while (!description.empty() && (blank(description.back()) || description.back() == '\n')) {
    description.remove_suffix(1);
  }
  return std::string(skip_blanks(description));
}

NodeNameMap NodeNameMap::parse(std::string_view text, const std::string& file) {
  NodeNameMap map;
  map.source_ = file;
  int line_number = 0;
  while (!text.empty()) {
    auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    ++line_number;
    line = skip_blanks(line);
    if (line.empty() || line.front() == '#') continue;

    std::uint64_t guid = 0;
    int base = 10;
    std::string_view digits = line;
    if (digits.starts_with("0x") || digits.starts_with("0X")) {
      base = 16;
      digits.remove_prefix(2);
    }
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), guid, base);
    if (ptr == digits.data()) bad_line(file, line_number, "no GUID at the start of the line");
    if (ec == std::errc::result_out_of_range) {
      bad_line(file, line_number, "GUID does not fit in 64 bits");
    }
    std::string_view rest(ptr, static_cast<std::size_t>(digits.data() + digits.size() - ptr));
    if (!rest.empty() && !blank(rest.front())) {
      bad_line(file, line_number, "GUID followed by \"" + std::string(rest.substr(0, 1)) + "\"");
    }
    rest = skip_blanks(rest);
    if (rest.empty() || rest.front() != '"') {
      bad_line(file, line_number, "the name must follow the GUID in double quotes");
    }
    auto close = rest.find('"', 1);
    if (close == std::string_view::npos)
      bad_line(file, line_number, "the name's closing quote is missing");
    std::string name(rest.substr(1, close - 1));
    auto after = skip_blanks(rest.substr(close + 1));
    if (!after.empty() && after.front() != '#') {
      bad_line(file, line_number, "unexpected text after the name");
    }
    if (name.empty()) bad_line(file, line_number, "the name is empty");
    if (!map.names_.try_emplace(guid, std::move(name)).second) {
      spdlog::warn(
          "msg=\"node-name-map names a GUID twice; the first name is used\" file=\"{}\" "
          "line={} guid={}",
          file, line_number, hex_guid(guid));
    }
  }
  return map;
}

std::shared_ptr<const NodeNameMap> NodeNameMap::load(const std::string& path, bool missing_ok) {
  std::ifstream in(path);
  if (!in) {
    if (missing_ok && errno == ENOENT) return std::make_shared<const NodeNameMap>();
    throw ConfigError(path + ": cannot read the node-name-map (" + std::strerror(errno) +
                      "); fix the path given by node_name_map / --node-name-map");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::make_shared<const NodeNameMap>(parse(text.str(), path));
}

const std::string* NodeNameMap::find(std::uint64_t guid) const {
  auto it = names_.find(guid);
  return it == names_.end() ? nullptr : &it->second;
}

std::string NodeNameMap::name(std::uint64_t guid, std::string_view description) const {
  if (const auto* mapped = find(guid)) return *mapped;
  auto trimmed = trim_node_description(description);
  return trimmed.empty() ? hex_guid(guid) : trimmed;
}

}  // namespace ibfabric
