#include "ib/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace ibfabric::state {
namespace {

constexpr std::string_view kMagic = "ibfabric-state";

std::string hex64(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    auto space = line.find(' ', start);
    out.push_back(line.substr(start, space == std::string_view::npos ? space : space - start));
    if (space == std::string_view::npos) return out;
    start = space + 1;
  }
}

template <class Int>
bool parse_int(std::string_view s, Int& out, int base = 10) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc{} && end == s.data() + s.size();
}

bool parse_guid(std::string_view s, std::uint64_t& out) {
  if (s.size() != 18 || s.substr(0, 2) != "0x") return false;
  return parse_int(s.substr(2), out, 16);
}

bool parse_port(std::string_view s, int& out) {
  return parse_int(s, out) && out >= 0 && out <= 255;
}

bool parse_time(std::string_view s, double& out) {
  if (s.empty() || s.front() == '-' || s.front() == '+') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  // Up to the year 5138: a larger time is not one this daemon wrote.
  return ec == std::errc{} && end == s.data() + s.size() && std::isfinite(out) && out >= 0 &&
         out < 1e11;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string escape(std::string_view text) {
  if (text.empty()) return "-";
  if (text == "-") return "%2D";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b >= 0x7f || c == '%') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view field) {
  if (field.empty()) return std::nullopt;
  if (field == "-") return std::string();
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    auto b = static_cast<unsigned char>(field[i]);
    if (b <= 0x20 || b >= 0x7f) return std::nullopt;
    if (field[i] != '%') {
      out += field[i];
      continue;
    }
    if (i + 2 >= field.size()) return std::nullopt;
    int hi = hex_digit(field[i + 1]);
    int lo = hex_digit(field[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

StateText::StateText(std::string_view collector, std::uint64_t origin, double saved,
                     std::size_t links_expected) {
  out_.reserve(64 + links_expected * 128);
  out_ += std::string(kMagic) + " " + std::to_string(kVersion) + " " + escape(collector) + "\n";
  out_ += "origin " + hex64(origin) + "\n";
  out_ += "saved " + number(saved) + "\n";
}

void StateText::add(const LinkRecord& l) {
  out_ += "link " + hex64(l.subnet) + " " + escape(l.device) + " " + hex64(l.guid) + " " +
          std::to_string(l.port) + " " + hex64(l.remote_guid) + " " +
          std::to_string(l.remote_port) + " " + std::to_string(l.remote_type) + " " +
          number(l.seen) + " " + escape(l.name) + " " + escape(l.remote_name) + "\n";
  ++links_;
}

std::string StateText::finish() && {
  out_ += "end " + std::to_string(links_) + "\n";
  return std::move(out_);
}

std::string serialize(const State& state) {
  StateText text(state.collector, state.origin, state.saved, state.links.size());
  for (const auto& l : state.links) text.add(l);
  return std::move(text).finish();
}

ParseResult parse(std::string_view text) {
  auto fail = [](std::string why) { return ParseResult{std::nullopt, std::move(why)}; };
  if (text.empty()) return fail("empty file");
  if (text.size() > kMaxFileSize) return fail("larger than " + std::to_string(kMaxFileSize));
  if (text.back() != '\n') return fail("truncated (no final newline)");
  State state;
  std::size_t line_no = 0;
  bool ended = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    auto where = "line " + std::to_string(line_no) + ": ";
    if (ended) return fail(where + "text after the end line");
    auto f = split(line);
    if (line_no == 1) {
      if (f.size() != 3 || f[0] != kMagic) return fail("not an ibfabric state file");
      int version = 0;
      if (!parse_int(f[1], version)) return fail(where + "bad version");
      if (version != kVersion) {
        return fail("version " + std::to_string(version) + ", this daemon reads version " +
                    std::to_string(kVersion));
      }
      auto collector = unescape(f[2]);
      if (!collector) return fail(where + "bad collector name");
      state.collector = *collector;
      continue;
    }
    if (line_no == 2) {
      if (f.size() != 2 || f[0] != "origin" || !parse_guid(f[1], state.origin)) {
        return fail(where + "expected origin 0x<16 hex digits>");
      }
      continue;
    }
    if (line_no == 3) {
      if (f.size() != 2 || f[0] != "saved" || !parse_time(f[1], state.saved)) {
        return fail(where + "expected saved <unix time>");
      }
      continue;
    }
    if (f[0] == "end") {
      std::size_t n = 0;
      if (f.size() != 2 || !parse_int(f[1], n)) return fail(where + "bad end line");
      if (n != state.links.size()) {
        return fail(where + "end says " + std::to_string(n) + " records, the file has " +
                    std::to_string(state.links.size()));
      }
      ended = true;
      continue;
    }
    if (f[0] != "link" || f.size() != 11) return fail(where + "expected a link or end line");
    LinkRecord l;
    auto device = unescape(f[2]);
    auto name = unescape(f[9]);
    auto remote_name = unescape(f[10]);
    if (!parse_guid(f[1], l.subnet) || !device || !parse_guid(f[3], l.guid) ||
        !parse_port(f[4], l.port) || !parse_guid(f[5], l.remote_guid) ||
        !parse_port(f[6], l.remote_port) || !parse_int(f[7], l.remote_type) || l.remote_type < 0 ||
        l.remote_type > 4 || !parse_time(f[8], l.seen) || !name || !remote_name) {
      return fail(where + "bad link record");
    }
    l.device = std::move(*device);
    l.name = std::move(*name);
    l.remote_name = std::move(*remote_name);
    state.links.push_back(std::move(l));
  }
  if (line_no < 3) return fail("truncated (no header)");
  if (!ended) return fail("truncated (no end line)");
  return ParseResult{std::move(state), ""};
}

ParseResult load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return ParseResult{std::nullopt, ""};
    return ParseResult{std::nullopt, "cannot open: " + std::string(std::strerror(errno))};
  }
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxFileSize) {
      return ParseResult{std::nullopt, "larger than " + std::to_string(kMaxFileSize)};
    }
  }
  if (in.bad()) return ParseResult{std::nullopt, "read error"};
  return parse(text);
}

std::string write_atomically(const std::string& path, const std::string& content) {
  // Unique per write: a collector replaced by a reload may still be writing its last one.
  static std::atomic<unsigned> writes{0};
  auto tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++writes);
  auto error = [&](const char* what) {
    std::string why = std::string(what) + " " + tmp + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return why;
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return std::string("open ") + tmp + ": " + std::strerror(errno);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    auto n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      errno = saved;
      return error("write");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return error("fsync");
  }
  if (::close(fd) != 0) return error("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return error("rename");
  return "";
}

}  // namespace ibfabric::state
