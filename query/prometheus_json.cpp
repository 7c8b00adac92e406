#include "query/prometheus_json.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace ibfabric::query {
namespace {

struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A recursive-descent reader over the body; nesting is bounded, so a hostile body cannot
// exhaust the stack.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  void ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) {
      ++i_;
    }
  }
  char peek() {
    ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Bad(what + " at byte " + std::to_string(i_));
  }
  bool done() {
    ws();
    return i_ == s_.size();
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u':
          utf8(out, code_point());
          break;
        default:
          fail("bad escape");
      }
    }
  }

  // Skips any value.
  void skip(int depth = 0) {
    if (depth > 64) fail("nested too deeply");
    char c = peek();
    if (c == '"') {
      string();
    } else if (c == '{') {
      ++i_;
      if (eat('}')) return;
      do {
        string();
        expect(':');
        skip(depth + 1);
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      if (eat(']')) return;
      do {
        skip(depth + 1);
      } while (eat(','));
      expect(']');
    } else {
      std::size_t start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                                s_[i_] == '+' || s_[i_] == '.')) {
        ++i_;
      }
      if (i_ == start) fail("expected a value");
    }
  }

  // Calls f(key) for each member of an object; f reads or skips the value.
  template <class F>
  void object(F&& f) {
    expect('{');
    if (eat('}')) return;
    do {
      std::string key = string();
      expect(':');
      f(key);
    } while (eat(','));
    expect('}');
  }
  template <class F>
  void array(F&& f) {
    expect('[');
    if (eat(']')) return;
    do {
      f();
    } while (eat(','));
    expect(']');
  }

  // A sample value: Prometheus writes it as a string ("1", "NaN", "+Inf"); a number is taken
  // too.
  double number_or_string() {
    std::string text;
    if (peek() == '"') {
      text = string();
    } else {
      std::size_t start = i_;
      skip();
      text = std::string(s_.substr(start, i_ - start));
    }
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "+Inf" || text == "Inf") return std::numeric_limits<double>::infinity();
    if (text == "-Inf") return -std::numeric_limits<double>::infinity();
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) fail("bad sample value '" + text + "'");
    return v;
  }

 private:
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        fail("bad \\u escape");
      }
    }
    return v;
  }
  unsigned code_point() {
    unsigned v = hex4();
    if (v >= 0xd800 && v < 0xdc00) {  // a surrogate pair
      if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail("lone surrogate");
      i_ += 2;
      unsigned low = hex4();
      if (low < 0xdc00 || low >= 0xe000) fail("bad surrogate pair");
      v = 0x10000 + ((v - 0xd800) << 10) + (low - 0xdc00);
    } else if (v >= 0xdc00 && v < 0xe000) {
      fail("lone surrogate");
    }
    return v;
  }
  static void utf8(std::string& out, unsigned v) {
    if (v < 0x80) {
      out.push_back(static_cast<char>(v));
    } else if (v < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (v >> 6)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3f)));
    } else if (v < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (v >> 12)));
      out.push_back(static_cast<char>(0x80 | ((v >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (v >> 18)));
      out.push_back(static_cast<char>(0x80 | ((v >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((v >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3f)));
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::string parse_vector(std::string_view body, const std::vector<std::string>& labels,
                         std::vector<Series>& out) {
  out.clear();
  try {
    Reader r(body);
    std::string status, error_type, error, result_type;
    bool have_result = false;
    std::vector<Series> result;
    auto sample = [&](Series& s) {
      bool got = false;
      r.array([&] {
        if (!got) {
          r.skip();  // the timestamp
          got = true;
          return;
        }
        s.value = r.number_or_string();
      });
    };
    r.object([&](const std::string& key) {
      if (key == "status") {
        status = r.string();
      } else if (key == "errorType") {
        error_type = r.string();
      } else if (key == "error") {
        error = r.string();
      } else if (key == "data") {
        r.object([&](const std::string& dkey) {
          if (dkey == "resultType") {
            result_type = r.string();
          } else if (dkey == "result") {
            have_result = true;
            if (r.peek() != '[') {  // a scalar: [time, "value"]
              r.skip();
              return;
            }
            if (result_type == "scalar") {
              Series s;
              s.labels.assign(labels.size(), "");
              sample(s);
              result.push_back(std::move(s));
              return;
            }
            r.array([&] {
              Series s;
              s.labels.assign(labels.size(), "");
              r.object([&](const std::string& skey) {
                if (skey == "metric") {
                  r.object([&](const std::string& name) {
                    std::string value = r.string();
                    for (std::size_t k = 0; k < labels.size(); ++k) {
                      if (labels[k] == name) {
                        s.labels[k] = std::move(value);
                        break;
                      }
                    }
                  });
                } else if (skey == "value") {
                  sample(s);
                } else {
                  r.skip();
                }
              });
              result.push_back(std::move(s));
            });
          } else {
            r.skip();
          }
        });
      } else {
        r.skip();
      }
    });
    if (!r.done()) r.fail("trailing bytes");
    if (status == "error") {
      return "query failed: " + (error_type.empty() ? "" : error_type + ": ") + error;
    }
    if (status != "success") return "no \"status\":\"success\" in the response";
    if (!have_result) return "no data.result in the response";
    if (result_type != "vector" && result_type != "scalar") {
      return "result type \"" + result_type + "\", not a vector";
    }
    out = std::move(result);
    return "";
  } catch (const Bad& e) {
    return std::string("malformed JSON: ") + e.what();
  }
}

}  // namespace ibfabric::query
