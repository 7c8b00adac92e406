#include "exporters/prometheus/web_config.h"

#include "config/config_section.h"

#include <filesystem>
#include <fstream>
#include <regex>

namespace ibfabric {
namespace {

const std::map<std::string, ClientAuth> kClientAuth = {
    {"NoClientCert", ClientAuth::none},
    {"RequestClientCert", ClientAuth::request},
    {"RequireAnyClientCert", ClientAuth::require_any},
    {"VerifyClientCertIfGiven", ClientAuth::verify_if_given},
    {"RequireAndVerifyClientCert", ClientAuth::require_and_verify},
};

void check_readable(ConfigSection& section, const std::string& key, const std::string& path) {
  std::ifstream in(path);
  if (!in) section.fail(key, "cannot read \"" + path + "\"");
}

int tls_version(ConfigSection& section, const std::string& key, const std::string& fallback) {
  // TLS 1.0 and 1.1 are refused: the toolkit's default minimum is TLS 1.2 and nothing that
  // scrapes a daemon today needs less.
  auto v = section.get_enum(key, fallback, {"TLS12", "TLS13"});
  return v == "TLS13" ? 13 : 12;
}

void refuse(ConfigSection& section, const std::string& key, const std::string& why) {
  if (section.has(key)) section.fail_key(key, why);
}

}  // namespace

WebConfig parse_web_config(const std::string& text, const std::string& source,
                           const std::string& base_dir) {
  WebConfig config;
  config.source = source;
  // As exporter-toolkit does: file names are relative to the web config file's directory.
  auto resolve = [&](const std::string& file) {
    if (file.empty() || base_dir.empty()) return file;
    return (std::filesystem::path(base_dir) / file).lexically_normal().string();
  };
  ConfigSection top(parse_yaml(text, source), source, "");
  if (auto tls = top.get_section("tls_server_config")) {
    TlsConfig t;
    refuse(*tls, "cert", "inline certificates are not supported; use cert_file");
    refuse(*tls, "key", "inline keys are not supported; use key_file");
    refuse(*tls, "cipher_suites",
           "not supported: ibfabricd uses OpenSSL's default cipher suites for TLS 1.2 and 1.3");
    refuse(*tls, "curve_preferences", "not supported: OpenSSL's default groups are used");
    refuse(*tls, "client_allowed_sans", "not supported");
    (void)tls->get_bool("prefer_server_cipher_suites", true);  // OpenSSL's order either way
    t.cert_file = resolve(tls->get_string("cert_file", ""));
    t.key_file = resolve(tls->get_string("key_file", ""));
    if (t.cert_file.empty()) tls->fail("cert_file", "a certificate file is required for TLS");
    if (t.key_file.empty()) tls->fail("key_file", "a key file is required for TLS");
    check_readable(*tls, "cert_file", t.cert_file);
    check_readable(*tls, "key_file", t.key_file);
    std::vector<std::string> names;
    for (const auto& [name, _] : kClientAuth) names.push_back(name);
    t.client_auth = kClientAuth.at(tls->get_enum("client_auth_type", "NoClientCert", names));
    t.client_ca_file = resolve(tls->get_string("client_ca_file", ""));
    bool verifies = t.client_auth == ClientAuth::verify_if_given ||
                    t.client_auth == ClientAuth::require_and_verify;
    if (verifies && t.client_ca_file.empty()) {
      tls->fail("client_auth_type", "verifying client certificates needs client_ca_file");
    }
    if (!t.client_ca_file.empty()) check_readable(*tls, "client_ca_file", t.client_ca_file);
    t.min_version = tls_version(*tls, "min_version", "TLS12");
    t.max_version = tls_version(*tls, "max_version", "TLS13");
    if (t.max_version < t.min_version) tls->fail("max_version", "is below min_version");
    tls->finish();
    config.tls = t;
  }
  if (auto http = top.get_section("http_server_config")) {
    if (http->get_bool("http2", false)) {
      http->fail("http2", "HTTP/2 is not supported; ibfabricd serves HTTP/1.1");
    }
    if (auto headers = http->get_section("headers")) {
      for (const auto& name : headers->keys()) {
        static const std::regex token("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$");
        if (!std::regex_match(name, token)) headers->fail_key(name, "not a valid header name");
        auto value = headers->get_string(name, "");
        if (value.find_first_of("\r\n") != std::string::npos) {
          headers->fail(name, "a header value cannot contain a line break");
        }
        config.headers[name] = value;
      }
      headers->finish();
    }
    http->finish();
  }
  if (auto users = top.get_section("basic_auth_users")) {
    // $2a$/$2b$/$2y$, a two-digit cost, 53 characters of salt and hash.
    static const std::regex bcrypt(R"(^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$)");
    for (const auto& user : users->keys()) {
      if (user.empty() || user.find(':') != std::string::npos) {
        users->fail_key(user, "a user name cannot be empty or contain ':'");
      }
      auto hash = users->get_string(user, "");
      if (!std::regex_match(hash, bcrypt)) {
        users->fail(user,
                    "expected a bcrypt hash such as $2y$10$... (make one with: htpasswd -nBC 10 "
                    "\"\" | tr -d ':')");
      }
      config.basic_auth_users[user] = hash;
    }
    users->finish();
  }
  top.finish();
  return config;
}

WebConfig load_web_config(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path().string();
  return parse_web_config(read_config_file(path, "--web.config.file"), path,
                          dir.empty() ? "." : dir);
}

}  // namespace ibfabric
