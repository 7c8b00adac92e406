#include "ib/sysfs_parse.h"

#include <charconv>
#include <limits>

namespace ibfabric::sysfs {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Unsigned integer of the whole of `digits` (no sign, no blanks), nullopt on overflow.
std::optional<std::uint64_t> whole_number(std::string_view digits, int base) {
  if (digits.empty()) return std::nullopt;
  for (char c : digits) {
    if (base == 10 ? !is_digit(c) : !is_hex_digit(c)) return std::nullopt;
  }
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

std::optional<NumberedName> parse_numbered_name(std::string_view text) {
  text = trim(text);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto number = whole_number(text.substr(0, colon), 10);
  if (!number || *number > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  std::string_view name = trim(text.substr(colon + 1));
  if (name.empty()) return std::nullopt;
  return NumberedName{static_cast<std::uint32_t>(*number), std::string(name)};
}

std::optional<LinkRate> parse_rate(std::string_view text) {
  text = trim(text);
  // The number: integer Gb/s, optionally with a fraction (the kernel only ever prints ".5").
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  auto whole = whole_number(text.substr(0, i), 10);
  if (!whole) return std::nullopt;
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
    // 1 Gb/s is 125,000,000 bytes/s, so up to six fraction digits convert exactly.
    if (fraction.empty() || fraction.size() > 6) return std::nullopt;
  }
  constexpr std::uint64_t kBytesPerGbit = 125'000'000;
  if (*whole > std::numeric_limits<std::uint64_t>::max() / kBytesPerGbit) return std::nullopt;
  std::uint64_t bytes = *whole * kBytesPerGbit;
  if (!fraction.empty()) {
    std::uint64_t scale = 1;
    for (std::size_t k = 0; k < fraction.size(); ++k) scale *= 10;
    bytes += *whole_number(fraction, 10) * (kBytesPerGbit / scale);
  }

  std::string_view rest = text.substr(i);
  constexpr std::string_view kUnit = " Gb/sec (";
  if (!rest.starts_with(kUnit) || !rest.ends_with(')')) return std::nullopt;
  rest = rest.substr(kUnit.size(), rest.size() - kUnit.size() - 1);  // "4X NDR" or "1X"

  std::size_t x = 0;
  while (x < rest.size() && is_digit(rest[x])) ++x;
  auto lanes = whole_number(rest.substr(0, x), 10);
  if (!lanes || *lanes == 0 || *lanes > 64 || x >= rest.size() || rest[x] != 'X') {
    return std::nullopt;
  }
  LinkRate rate;
  rate.bytes_per_second = bytes;
  rate.lanes = static_cast<std::uint32_t>(*lanes);
  rate.width = std::string(rest.substr(0, x + 1));
  std::string_view speed = rest.substr(x + 1);
  if (speed.empty()) {
    // Older kernels print no name for SDR: "2.5 Gb/sec (1X)"; newer ones " SDR".
    rate.speed = "SDR";
  } else {
    if (speed.front() != ' ') return std::nullopt;
    speed.remove_prefix(1);
    if (speed.empty()) return std::nullopt;
    for (char c : speed) {
      if (!is_digit(c) && !(c >= 'A' && c <= 'Z')) return std::nullopt;
    }
    rate.speed = std::string(speed);
  }
  return rate;
}

std::optional<std::string> parse_guid(std::string_view text) {
  text = trim(text);
  // Four groups of four hex digits: "%04x:%04x:%04x:%04x".
  if (text.size() != 19) return std::nullopt;
  std::string guid = "0x";
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (i % 5 == 4) {
      if (c != ':') return std::nullopt;
      continue;
    }
    if (!is_hex_digit(c)) return std::nullopt;
    guid += (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return guid;
}

std::optional<std::uint64_t> parse_hex(std::string_view text) {
  text = trim(text);
  if (!text.starts_with("0x") && !text.starts_with("0X")) return std::nullopt;
  return whole_number(text.substr(2), 16);
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  return whole_number(trim(text), 10);
}

CounterText parse_counter(std::string_view text) {
  text = trim(text);
  if (text == "N/A (no PMA)") return {CounterText::Kind::not_supported, 0};
  auto value = whole_number(text, 10);
  if (!value) return {CounterText::Kind::garbled, 0};
  return {CounterText::Kind::value, *value};
}

std::string printable(std::string_view text) {
  constexpr std::size_t kMax = 64;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}

}  // namespace ibfabric::sysfs
