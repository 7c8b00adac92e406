#include "query/http_config.h"

#include "config/config_section.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ibfabric::query {

namespace {

void check_readable(ConfigSection& section, const std::string& key, const std::string& path) {
  std::ifstream in(path);
  if (!in) section.fail(key, "cannot read \"" + path + "\"");
}

// A secret file's text without its trailing line break (as Prometheus trims it).
std::string read_secret(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + what + " \"" + path + "\"");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

}  // namespace

HttpConfig parse_http_config(const std::string& text, const std::string& source,
                             const std::string& base_dir) {
  HttpConfig c;
  c.source = source;
  auto resolve = [&](const std::string& file) {
    if (file.empty() || base_dir.empty()) return file;
    return (std::filesystem::path(base_dir) / file).lexically_normal().string();
  };
  ConfigSection top(parse_yaml(text, source), source, "");
  // One way to authenticate: Prometheus refuses two, and so does this.
  int ways = 0;
  if (top.has("bearer_token_file")) {
    ++ways;
    c.auth_type = "Bearer";
    c.credentials_file = resolve(top.get_string("bearer_token_file", ""));
    check_readable(top, "bearer_token_file", c.credentials_file);
  }
  if (top.has("bearer_token")) {
    top.fail_key("bearer_token", "give the token in a file: bearer_token_file, or authorization");
  }
  if (auto auth = top.get_section("authorization")) {
    ++ways;
    c.auth_type = auth->get_string("type", "Bearer");
    if (c.auth_type.empty() || c.auth_type.find_first_of(" \r\n") != std::string::npos) {
      auth->fail("type", "an authorization scheme such as Bearer");
    }
    c.credentials = auth->get_string("credentials", "");
    c.credentials_file = resolve(auth->get_string("credentials_file", ""));
    if (c.credentials.empty() == c.credentials_file.empty()) {
      auth->fail("credentials_file", "give one of credentials and credentials_file");
    }
    if (!c.credentials_file.empty()) check_readable(*auth, "credentials_file", c.credentials_file);
    auth->finish();
  }
  if (auto basic = top.get_section("basic_auth")) {
    ++ways;
    c.auth_type = "Basic";
    c.username = basic->get_string("username", "");
    if (c.username.empty() || c.username.find(':') != std::string::npos) {
      basic->fail("username", "a user name, not empty and without ':'");
    }
    c.password = basic->get_string("password", "");
    c.password_file = resolve(basic->get_string("password_file", ""));
    if (!c.password.empty() && !c.password_file.empty()) {
      basic->fail("password_file", "give one of password and password_file");
    }
    if (!c.password_file.empty()) check_readable(*basic, "password_file", c.password_file);
    basic->finish();
  }
  if (ways > 1) {
    top.fail("basic_auth",
             "give one of basic_auth, authorization and bearer_token_file, as Prometheus does");
  }
  if (auto tls = top.get_section("tls_config")) {
    c.ca_file = resolve(tls->get_string("ca_file", ""));
    c.cert_file = resolve(tls->get_string("cert_file", ""));
    c.key_file = resolve(tls->get_string("key_file", ""));
    c.server_name = tls->get_string("server_name", "");
    c.insecure_skip_verify = tls->get_bool("insecure_skip_verify", false);
    for (const char* inline_key : {"ca", "cert", "key"}) {
      if (tls->has(inline_key)) {
        tls->fail_key(inline_key, std::string("give it as a file: ") + inline_key + "_file");
      }
    }
    if (c.cert_file.empty() != c.key_file.empty()) {
      tls->fail(c.cert_file.empty() ? "key_file" : "cert_file",
                "a client certificate needs both cert_file and key_file");
    }
    if (!c.ca_file.empty()) check_readable(*tls, "ca_file", c.ca_file);
    if (!c.cert_file.empty()) check_readable(*tls, "cert_file", c.cert_file);
    if (!c.key_file.empty()) check_readable(*tls, "key_file", c.key_file);
    tls->finish();
  }
  top.finish();
  return c;
}

HttpConfig load_http_config(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path().string();
  return parse_http_config(read_config_file(path, "--prometheus.http-config-file"), path,
                           dir.empty() ? "." : dir);
}

std::string authorization(const HttpConfig& c) {
  if (c.auth_type.empty()) return "";
  if (c.auth_type == "Basic") {
    std::string password =
        c.password_file.empty() ? c.password : read_secret(c.password_file, "password_file");
    return "Basic " + base64(c.username + ":" + password);
  }
  std::string secret =
      c.credentials_file.empty() ? c.credentials : read_secret(c.credentials_file, "credentials");
  return c.auth_type + " " + secret;
}

}  // namespace ibfabric::query
