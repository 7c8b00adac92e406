// The programs' log lines as JSON (core/log_format.h, --log.format=json).
#include "core/log_format.h"

#include <gtest/gtest.h>

namespace ibfabric {
namespace {

TEST(LogFormat, LogfmtFieldsBecomeJsonFields) {
  EXPECT_EQ(logfmt_to_json_fields(R"(msg="named" suspect="leaf-2 port 1 <-> h3 port 1")"),
            R"("msg":"named","suspect":"leaf-2 port 1 <-> h3 port 1")");
  EXPECT_EQ(logfmt_to_json_fields(R"(msg=evaluated pairs=12 read_s=0.004)"),
            R"("msg":"evaluated","pairs":"12","read_s":"0.004")");
  // Escapes inside a quoted value, and what JSON must escape.
  EXPECT_EQ(logfmt_to_json_fields(R"(error="HTTP 500: \"overloaded\"" path=a\b)"),
            R"("error":"HTTP 500: \"overloaded\"","path":"a\\b")");
  EXPECT_EQ(logfmt_to_json_fields("msg=\"tab\there\""), R"("msg":"tab\there")");
  // Words that are no field become the message.
  EXPECT_EQ(logfmt_to_json_fields("listening on :10920 port=10920"),
            R"("msg":"listening on :10920","port":"10920")");
  EXPECT_EQ(logfmt_to_json_fields(""), "");
}

}  // namespace
}  // namespace ibfabric
