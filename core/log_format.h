#pragma once
// The programs' log lines: one line an event, key=value fields (logfmt: msg="named"
// suspect="..."), or the same fields as one JSON object a line (--log.format=json), for log
// pipelines that parse JSON (Loki's json stage, Elasticsearch, Cloud Logging).

#include <spdlog/logger.h>

#include <string>
#include <string_view>

namespace ibfabric {

// Sets `logger`'s format: "logfmt" (a time, unless journald stamps the line: JOURNAL_STREAM) or
// "json" ({"ts":"...","level":"warn","msg":"...","key":"value",...}). Throws
// std::invalid_argument for another name.
void set_log_format(spdlog::logger& logger, const std::string& format);

// A logfmt payload as the fields of a JSON object (without braces): each key=value and
// key="quoted value" as "key":"value"; text that is not key=value becomes a "msg" field.
std::string logfmt_to_json_fields(std::string_view payload);

}  // namespace ibfabric
