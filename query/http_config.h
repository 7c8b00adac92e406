#pragma once
// How ibfabric-localize authenticates to its store: a file in the format and with the names of
// Prometheus' `http_config` (the part a scrape or remote-read configuration carries), so that
// what an operator already wrote for Prometheus works here:
//
//   authorization:                     # or the older bearer_token_file: FILE
//     type: Bearer                     # the default
//     credentials_file: /etc/ibfabric/store-token
//   basic_auth:                        # instead of authorization
//     username: ibfabric
//     password_file: /etc/ibfabric/store-password
//   tls_config:
//     ca_file: /etc/ibfabric/store-ca.crt
//     cert_file: /etc/ibfabric/localize.crt   # a client certificate, with its key
//     key_file: /etc/ibfabric/localize.key
//     server_name: prometheus.example.com     # checked against the certificate, sent as SNI
//     insecure_skip_verify: false
//
// Secret files are read again for every query, as Prometheus does, so a rotated token is used
// at once; relative file names are taken from the config file's directory. Secrets never reach
// the command line (ps) or the log.

#include <optional>
#include <string>

namespace ibfabric::query {

struct HttpConfig {
  std::string source;  // the file, for messages
  // Authorization header: "<type> <secret>", the secret inline in the file or from a file.
  std::string auth_type;  // "" none; "Bearer", ...; "Basic" from basic_auth
  std::string credentials, credentials_file;
  std::string username, password, password_file;  // basic_auth
  std::string ca_file, cert_file, key_file, server_name;
  bool insecure_skip_verify = false;
};

// Parses and checks the file: every key known, one way to authenticate, the files readable.
// Throws ConfigError naming file:line:column.
HttpConfig load_http_config(const std::string& path);
HttpConfig parse_http_config(const std::string& text, const std::string& source,
                             const std::string& base_dir = "");

// The Authorization header's value for one request ("" for none), the secret files read now.
// Throws std::runtime_error naming the file that could not be read.
std::string authorization(const HttpConfig& config);

}  // namespace ibfabric::query
