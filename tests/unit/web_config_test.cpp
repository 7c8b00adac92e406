#include "exporters/prometheus/web_config.h"
#include "config/config_section.h"
#include "exporters/prometheus/basic_auth.h"

#include <crypt.h>
#include <gtest/gtest.h>

#include <memory>

namespace ibfabric {
namespace {

std::string bcrypt(const std::string& password, int cost) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  EXPECT_NE(
      crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, salt, sizeof salt),
      nullptr);
  auto data = std::make_unique<crypt_data>();
  return crypt_rn(password.c_str(), salt, data.get(), sizeof *data);
}

std::string error_of(const std::string& text) {
  try {
    parse_web_config(text, "web.yml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(WebConfig, EmptyFileMeansPlainHttpWithoutAuth) {
  auto config = parse_web_config("", "web.yml");
  EXPECT_FALSE(config.tls);
  EXPECT_TRUE(config.basic_auth_users.empty());
}

TEST(WebConfig, ReadsUsersAndHeaders) {
  std::string hash = bcrypt("secret", 4);
  auto config = parse_web_config(
      "basic_auth_users:\n  alice: " + hash + "\nhttp_server_config:\n  headers:\n    X-A: b\n",
      "web.yml");
  EXPECT_EQ(config.basic_auth_users.at("alice"), hash);
  EXPECT_EQ(config.headers.at("X-A"), "b");
}

TEST(WebConfig, ErrorsNameTheLocationAndTheFix) {
  EXPECT_NE(error_of("basic_auth_users:\n  alice: secret\n").find("web.yml:2:10"),
            std::string::npos);
  EXPECT_NE(error_of("basic_auth_users:\n  alice: secret\n").find("htpasswd"), std::string::npos);
  EXPECT_NE(error_of("tls_server_config:\n  key_file: k\n").find("cert_file"), std::string::npos);
  EXPECT_NE(error_of("http_server_config:\n  http2: true\n").find("HTTP/2"), std::string::npos);
  EXPECT_NE(error_of("http_server_config:\n  headers:\n    \"Bad Name\": x\n").find("web.yml:3:5"),
            std::string::npos);
  EXPECT_NE(error_of("unknown: 1\n").find("web.yml:1:1"), std::string::npos);
}

TEST(BasicAuth, ParsesTheHeader) {
  auto ok = BasicAuth::parse_header("Basic YWxpY2U6czNjcjN0OmFuZC1tb3Jl");  // alice:s3cr3t:and-more
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first, "alice");
  EXPECT_EQ(ok->second, "s3cr3t:and-more");
  auto lower = BasicAuth::parse_header("basic YTpi");  // a:b
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->second, "b");
  auto padded = BasicAuth::parse_header("Basic YTpiYw==");  // a:bc
  ASSERT_TRUE(padded);
  EXPECT_EQ(padded->second, "bc");
  EXPECT_FALSE(BasicAuth::parse_header(""));
  EXPECT_FALSE(BasicAuth::parse_header("Bearer YTpi"));
  EXPECT_FALSE(BasicAuth::parse_header("Basic YWJj"));   // "abc": no colon
  EXPECT_FALSE(BasicAuth::parse_header("Basic YTpi="));  // bad length
  EXPECT_FALSE(BasicAuth::parse_header("Basic Y=pi"));   // padding in the middle
  EXPECT_FALSE(BasicAuth::parse_header("Basic YT!i"));   // not base64
}

TEST(BasicAuth, VerifiesAgainstBcrypt) {
  BasicAuth auth({{"alice", bcrypt("right", 4)}});
  EXPECT_TRUE(auth.verify("alice", "right"));
  EXPECT_TRUE(auth.verify("alice", "right"));  // remembered
  EXPECT_FALSE(auth.verify("alice", "wrong"));
  EXPECT_FALSE(auth.verify("alice", ""));
  EXPECT_FALSE(auth.verify("bob", "right"));
}

TEST(BasicAuth, UnknownUsersPayTheHighestConfiguredCost) {
  std::string cheap = bcrypt("a", 4);
  std::string dear = bcrypt("b", 6);
  BasicAuth auth({{"alice", cheap}, {"bob", dear}});
  const std::string& dummy = auth.hash_for("mallory");
  EXPECT_NE(dummy, cheap);
  EXPECT_NE(dummy, dear);
  EXPECT_EQ(dummy.substr(0, 7), "$2b$06$");  // the same bcrypt work as bob's check
  EXPECT_EQ(auth.hash_for("alice"), cheap);
}

}  // namespace
}  // namespace ibfabric
