#pragma once
// HTTP basic auth against bcrypt hashes (libxcrypt's crypt_rn), as exporter-toolkit does it.
//
// A user that does not exist is checked against a dummy hash of the highest configured cost, so a
// wrong user name costs the same bcrypt time as a wrong password and response times do not tell
// which user names exist. Successful checks are remembered (by user and SHA-256 of the password)
// so that a scraper presenting the same credentials every 15 s does not pay bcrypt each time.
// verify() is slow by design (bcrypt): the HTTP server runs it off the event loop.

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace ibfabric {

class BasicAuth {
 public:
  explicit BasicAuth(std::map<std::string, std::string> users);

  // "Basic dXNlcjpwYXNz" -> {"user", "pass"}; nullopt when it is not a well-formed basic auth
  // header.
  static std::optional<std::pair<std::string, std::string>> parse_header(std::string_view value);

  // True when `password` matches the user's hash. Thread-safe; blocks for the bcrypt cost.
  bool verify(const std::string& user, const std::string& password);

  // The hash a check of `user` runs bcrypt against: the user's own, or the dummy.
  const std::string& hash_for(const std::string& user) const;
  bool empty() const { return users_.empty(); }

 private:
  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  std::mutex mutex_;
  std::set<std::string> verified_;  // user + '\0' + sha256(password)
};

}  // namespace ibfabric
