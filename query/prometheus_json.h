#pragma once
// The response of a Prometheus-compatible instant query (/api/v1/query), as Prometheus,
// VictoriaMetrics, Thanos Query and Mimir write it:
//   {"status":"success","data":{"resultType":"vector","result":[
//     {"metric":{"job":"ibfabric",...},"value":[1732771234.5,"42"]}, ...]}}
// or {"status":"error","errorType":"...","error":"..."}. Only what the localizer reads is kept:
// the values of the labels asked for, and the sample's value. A parser of its own: the result
// of one query can hold hundreds of thousands of series, so it keeps no document tree.

#include <string>
#include <string_view>
#include <vector>

namespace ibfabric::query {

struct Series {
  std::vector<std::string> labels;  // the values of the labels asked for, in order ("" if absent)
  double value = 0;
};

// Parses `body` into `out`; returns "" on success, else what is wrong (the server's error, or
// where the body stops being what a vector result looks like). A scalar result is one series
// without labels.
std::string parse_vector(std::string_view body, const std::vector<std::string>& labels,
                         std::vector<Series>& out);

}  // namespace ibfabric::query
