#include "core/log_format.h"

#include <spdlog/pattern_formatter.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

namespace ibfabric {

namespace {

void json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    auto t = msg.time;
    std::time_t secs = system_clock::to_time_t(t);
    auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[96];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms));
    auto level = spdlog::level::to_string_view(msg.level);
    std::string line = "{\"ts\":\"" + std::string(ts) + "\",\"level\":";
    json_string(line, std::string_view(level.data(), level.size()));
    std::string fields =
        logfmt_to_json_fields(std::string_view(msg.payload.data(), msg.payload.size()));
    if (!fields.empty()) line += "," + fields;
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::string logfmt_to_json_fields(std::string_view p) {
  std::string out, loose;
  std::size_t i = 0;
  while (i < p.size()) {
    while (i < p.size() && p[i] == ' ') ++i;
    std::size_t key_start = i;
    while (i < p.size() && p[i] != '=' && p[i] != ' ') ++i;
    if (i >= p.size() || p[i] != '=' || i == key_start) {  // a word that is no field
      loose +=
          std::string(loose.empty() ? "" : " ") + std::string(p.substr(key_start, i - key_start));
      continue;
    }
    std::string_view key = p.substr(key_start, i - key_start);
    ++i;  // '='
    std::string value;
    if (i < p.size() && p[i] == '"') {
      for (++i; i < p.size() && p[i] != '"'; ++i) {
        if (p[i] == '\\' && i + 1 < p.size()) ++i;
        value.push_back(p[i]);
      }
      if (i < p.size()) ++i;  // closing quote
    } else {
      while (i < p.size() && p[i] != ' ') value.push_back(p[i++]);
    }
    if (!out.empty()) out.push_back(',');
    json_string(out, key);
    out.push_back(':');
    json_string(out, value);
  }
  if (!loose.empty()) {
    std::string field;
    json_string(field, "msg");
    field.push_back(':');
    json_string(field, loose);
    out = out.empty() ? field : field + "," + out;
  }
  return out;
}

void set_log_format(spdlog::logger& logger, const std::string& format) {
  if (format == "json") {
    logger.set_formatter(std::make_unique<JsonFormatter>());
  } else if (format == "logfmt") {
    logger.set_pattern(std::getenv("JOURNAL_STREAM") ? "level=%l %v"
                                                     : "%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  } else {
    throw std::invalid_argument("--log.format=" + format + ": logfmt or json");
  }
}

}  // namespace ibfabric
