// The store's credentials and TLS in Prometheus' http_config format (query/http_config.h).
#include "query/http_config.h"

#include "config/config_section.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ibfabric::query {
namespace {

std::string error_of(const std::string& text, const std::string& dir = "") {
  try {
    parse_http_config(text, "store.yml", dir);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

class HttpConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("http-config-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(HttpConfigFiles, ABearerTokenFileIsReadAtEachRequest) {
  write("token", "first\n");
  auto c =
      parse_http_config("authorization:\n  credentials_file: token\n", "store.yml", dir_.string());
  EXPECT_EQ(authorization(c), "Bearer first");
  write("token", "second");
  EXPECT_EQ(authorization(c), "Bearer second");  // rotated: used at once
  std::filesystem::remove(dir_ / "token");
  EXPECT_THROW(authorization(c), std::runtime_error);
  // The older spelling, and another scheme.
  write("token", "t");
  EXPECT_EQ(authorization(parse_http_config("bearer_token_file: token\n", "s", dir_.string())),
            "Bearer t");
  EXPECT_EQ(authorization(parse_http_config("authorization:\n  type: Token\n  credentials: x\n",
                                            "s", dir_.string())),
            "Token x");
}

TEST_F(HttpConfigFiles, BasicAuthFromAPasswordFile) {
  write("password", "open sesame\n");
  auto c = parse_http_config("basic_auth:\n  username: ibfabric\n  password_file: password\n",
                             "store.yml", dir_.string());
  EXPECT_EQ(authorization(c), "Basic aWJmYWJyaWM6b3BlbiBzZXNhbWU=");  // ibfabric:open sesame
  EXPECT_EQ(authorization(parse_http_config("", "store.yml")), "");
}

TEST_F(HttpConfigFiles, TlsFilesAreTakenFromTheConfigsDirectory) {
  for (const char* f : {"ca.crt", "c.crt", "c.key"}) write(f, "x");
  auto c = parse_http_config(
      "tls_config:\n  ca_file: ca.crt\n  cert_file: c.crt\n  key_file: c.key\n"
      "  server_name: store.example\n",
      "store.yml", dir_.string());
  EXPECT_EQ(c.ca_file, (dir_ / "ca.crt").string());
  EXPECT_EQ(c.cert_file, (dir_ / "c.crt").string());
  EXPECT_EQ(c.server_name, "store.example");
  EXPECT_FALSE(c.insecure_skip_verify);
}

TEST(HttpConfig, MistakesAreNamedWhereTheyAre) {
  auto typo = error_of("basic_auth:\n  username: me\n  pasword_file: x\n");
  EXPECT_EQ(typo.rfind("store.yml:3:3: ", 0), 0u) << typo;
  EXPECT_NE(typo.find("pasword_file"), std::string::npos) << typo;
  EXPECT_NE(error_of("bearer_token: abc\n").find("store.yml:1:1"), std::string::npos);
  EXPECT_NE(error_of("bearer_token: abc\n").find("bearer_token_file"), std::string::npos);
  EXPECT_NE(error_of("authorization:\n  type: Bearer\n").find("credentials_file"),
            std::string::npos);
  EXPECT_NE(
      error_of("basic_auth:\n  username: a\n  password: b\nbearer_token_file: /etc/hostname\n")
          .find("give one of"),
      std::string::npos);
  EXPECT_NE(error_of("tls_config:\n  cert_file: /etc/hostname\n").find("key_file"),
            std::string::npos);
  EXPECT_NE(error_of("tls_config:\n  ca_file: /nonexistent/ca.crt\n").find("cannot read"),
            std::string::npos);
  EXPECT_NE(error_of("tls_config:\n  ca: inline\n").find("ca_file"), std::string::npos);
}

}  // namespace
}  // namespace ibfabric::query
