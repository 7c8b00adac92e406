// The query API's answers as Prometheus 2.42 writes them (shapes copied from its responses to
// curl here), and what is wrong with a bad one.

#include "query/prometheus_json.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ibfabric::query {
namespace {

TEST(PrometheusJson, VectorKeepsTheLabelsAskedForInOrder) {
  std::vector<Series> out;
  auto error = parse_vector(
      R"({"status":"success","data":{"resultType":"vector","result":[)"
      R"({"metric":{"instance":"h1:10916","job":"ibfabric","peer":"gpu-node-\u00e9 \"x\"\\"},)"
      R"("value":[1732771234.5,"42.5"]},)"
      R"({"metric":{},"value":[1732771234.5,"NaN"]},)"
      R"({"metric":{"job":"j"},"value":[1732771234.5,"+Inf"]}]}})",
      {"job", "instance", "peer"}, out);
  ASSERT_EQ(error, "");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].labels,
            (std::vector<std::string>{"ibfabric", "h1:10916", "gpu-node-\xc3\xa9 \"x\"\\"}));
  EXPECT_EQ(out[0].value, 42.5);
  EXPECT_EQ(out[1].labels, (std::vector<std::string>{"", "", ""}));
  EXPECT_TRUE(std::isnan(out[1].value));
  EXPECT_TRUE(std::isinf(out[2].value));
}

TEST(PrometheusJson, ScalarIsOneSeries) {
  std::vector<Series> out;
  ASSERT_EQ(
      parse_vector(R"({"status":"success","data":{"resultType":"scalar","result":[1.5,"7"]}})",
                   {"job"}, out),
      "");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value, 7);
}

TEST(PrometheusJson, ErrorsSayWhat) {
  std::vector<Series> out;
  EXPECT_EQ(
      parse_vector(R"({"status":"error","errorType":"bad_data","error":"parse error"})", {}, out),
      "query failed: bad_data: parse error");
  EXPECT_EQ(
      parse_vector(R"({"status":"success","data":{"resultType":"matrix","result":[]}})", {}, out),
      "result type \"matrix\", not a vector");
  auto e = parse_vector(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":)",
                        {}, out);
  EXPECT_EQ(e.rfind("malformed JSON: ", 0), 0u) << e;
  EXPECT_NE(parse_vector("<html>502 Bad Gateway</html>", {}, out), "");
  EXPECT_NE(
      parse_vector(
          R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})",
          {}, out),
      "");
  EXPECT_TRUE(out.empty());
  std::string deep(100, '[');
  EXPECT_NE(parse_vector(R"({"x":)" + deep, {}, out), "");
}

}  // namespace
}  // namespace ibfabric::query
