#pragma once
// The web configuration file that Prometheus exporters share (exporter-toolkit's
// --web.config.file): TLS for the endpoint and basic auth with bcrypt hashes.
//
//   tls_server_config:
//     cert_file: /etc/ibfabric/tls.crt
//     key_file: /etc/ibfabric/tls.key
//     client_auth_type: RequireAndVerifyClientCert   # optional
//     client_ca_file: /etc/ibfabric/ca.crt            # with client certificates
//     min_version: TLS12                              # TLS12 (default) or TLS13
//     max_version: TLS13
//   http_server_config:
//     headers: {Strict-Transport-Security: max-age=31536000}
//   basic_auth_users:
//     prometheus: $2y$10$...                          # bcrypt, e.g. htpasswd -nBC 10 ""
//
// Keys the toolkit has but ibfabricd cannot honour (cipher_suites, curve_preferences, http2: true,
// client_allowed_sans, inline cert/key) are errors rather than silently ignored.

#include <map>
#include <optional>
#include <string>

namespace ibfabric {

enum class ClientAuth {
  none,                // NoClientCert
  request,             // RequestClientCert: asked for, not required, not verified
  require_any,         // RequireAnyClientCert: required, not verified
  verify_if_given,     // VerifyClientCertIfGiven
  require_and_verify,  // RequireAndVerifyClientCert
};

struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  ClientAuth client_auth = ClientAuth::none;
  std::string client_ca_file;
  int min_version = 12;  // 12 = TLS 1.2, 13 = TLS 1.3
  int max_version = 13;
};

struct WebConfig {
  std::string source;  // the file, for messages
  std::optional<TlsConfig> tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
  std::map<std::string, std::string> headers;           // added to every response
};

// Parses and checks the file: every key known, bcrypt hashes well formed, certificate, key and
// CA files readable. Throws ConfigError naming file:line:column.
// Relative file names are taken from the web config file's directory, as exporter-toolkit does.
WebConfig load_web_config(const std::string& path);
// `base_dir`: where relative file names point ("" = as given).
WebConfig parse_web_config(const std::string& text, const std::string& source,
                           const std::string& base_dir = "");

}  // namespace ibfabric
