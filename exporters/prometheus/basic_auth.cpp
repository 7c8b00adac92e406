#include "exporters/prometheus/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace ibfabric {
namespace {

constexpr std::size_t kMaxRemembered = 256;

int bcrypt_cost(const std::string& hash) { return std::stoi(hash.substr(4, 2)); }

std::optional<std::string> base64_decode(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '=') {
      if (i + 2 < in.size()) return std::nullopt;  // only in the last two places
      ++padding;
      continue;
    }
    if (padding) return std::nullopt;
    auto pos = kAlphabet.find(c);
    if (pos == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string sha256(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  return std::string(reinterpret_cast<char*>(digest), size);
}

// crypt_rn into a heap buffer (struct crypt_data is about 32 KiB).
std::optional<std::string> crypt_hash(const std::string& password, const std::string& setting) {
  auto data = std::make_unique<crypt_data>();
  const char* out = crypt_rn(password.c_str(), setting.c_str(), data.get(), sizeof *data);
  if (!out || out[0] == '*') return std::nullopt;
  return std::string(out);
}

}  // namespace

BasicAuth::BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {
  if (users_.empty()) return;
  int cost = 4;
  for (const auto& [_, hash] : users_) cost = std::max(cost, bcrypt_cost(hash));
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, salt, sizeof salt)) {
    throw std::runtime_error("cannot make a bcrypt salt (libxcrypt without bcrypt?)");
  }
  auto dummy = crypt_hash("ibfabric: a password nobody has", salt);
  if (!dummy) throw std::runtime_error("bcrypt is not available in libcrypt");
  dummy_hash_ = *dummy;
}

std::optional<std::pair<std::string, std::string>> BasicAuth::parse_header(std::string_view value) {
  constexpr std::string_view kScheme = "Basic ";
  if (value.size() < kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(value[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return std::nullopt;
    }
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  auto decoded = base64_decode(value);
  if (!decoded) return std::nullopt;
  auto colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return std::make_pair(decoded->substr(0, colon), decoded->substr(colon + 1));
}

const std::string& BasicAuth::hash_for(const std::string& user) const {
  auto it = users_.find(user);
  return it == users_.end() ? dummy_hash_ : it->second;
}

bool BasicAuth::verify(const std::string& user, const std::string& password) {
  if (users_.empty()) return false;
  std::string key = user + '\0' + sha256(password);
  {
    std::lock_guard lock(mutex_);
    if (verified_.count(key)) return true;
  }
  const std::string& hash = hash_for(user);
  auto computed = crypt_hash(password, hash);
  bool known = users_.count(user) > 0;
  bool match = computed && computed->size() == hash.size() &&
               CRYPTO_memcmp(computed->data(), hash.data(), hash.size()) == 0;
  if (!known || !match) return false;
  std::lock_guard lock(mutex_);
  if (verified_.size() >= kMaxRemembered) verified_.clear();
  verified_.insert(std::move(key));
  return true;
}

}  // namespace ibfabric
