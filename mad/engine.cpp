#include "mad/engine_impl.h"

// The engine's public value types, its metrics and Engine::create. How the rest of the engine is
// split over files: engine_impl.h.

namespace ibfabric::mad {

using namespace detail;

std::string Destination::to_string() const {
  if (!directed) return "lid " + std::to_string(lid);
  std::string s = "route 0";
  for (auto hop : path) s += "," + std::to_string(hop);
  return s;
}

Request& Request::set(enum MAD_FIELDS field, std::uint32_t value) {
  payload.resize(IB_MAD_SIZE, 0);
  mad_set_field(payload.data(), 0, field, value);
  return *this;
}

Request& Request::set64(enum MAD_FIELDS field, std::uint64_t value) {
  payload.resize(IB_MAD_SIZE, 0);
  mad_set_field64(payload.data(), 0, field, value);
  return *this;
}

Request Request::smp_get(Destination to, std::uint16_t attr_id, std::uint32_t attr_mod) {
  Request r;
  r.mgmt_class = to.directed ? kSmiDirected : kSmiLid;
  r.to = std::move(to);
  r.attr_id = attr_id;
  r.attr_mod = attr_mod;
  return r;
}

Request Request::pma_get(std::uint16_t lid, std::uint16_t attr_id, std::uint32_t attr_mod) {
  Request r;
  r.mgmt_class = kPerfMgt;
  r.to = Destination::to_lid(lid);
  r.attr_id = attr_id;
  r.attr_mod = attr_mod;
  return r;
}

const char* to_string(Status status) {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::mad_status:
      return "mad_status";
    case Status::timeout:
      return "timeout";
    case Status::port_error:
      return "port_error";
    case Status::port_unavailable:
      return "port_unavailable";
    case Status::queue_full:
      return "queue_full";
    case Status::refused:
      return "refused";
    case Status::cancelled:
      return "cancelled";
  }
  return "unknown";
}

const std::uint8_t* Response::data() const {
  if (mad.size() < IB_MAD_SIZE) return nullptr;
  return mad.data() + data_offset(mad[1]);
}

std::size_t Response::data_size() const {
  if (mad.size() < IB_MAD_SIZE) return 0;
  return mad.size() - static_cast<std::size_t>(data_offset(mad[1]));
}

std::uint32_t Response::get(enum MAD_FIELDS field) const {
  const auto* d = data();
  return d ? mad_get_field(mutable_bytes(d), 0, field) : 0;
}

std::uint64_t Response::get64(enum MAD_FIELDS field) const {
  const auto* d = data();
  return d ? mad_get_field64(mutable_bytes(d), 0, field) : 0;
}

std::string Response::get_string(enum MAD_FIELDS field) const {
  const auto* d = data();
  if (!d) return {};
  // Strings in MADs are at most 64 octets (NodeDescription) and need not be terminated.
  char buf[IB_SMP_DATA_SIZE + 1] = {};
  mad_decode_field(mutable_bytes(d), field, buf);
  buf[IB_SMP_DATA_SIZE] = '\0';
  return std::string(buf, strnlen(buf, IB_SMP_DATA_SIZE));
}

namespace detail {

void EngineImpl::fill_metrics(MetricsBuilder& out) const {
  out.declare("ibfabric_mad_requests_total",
              "MAD requests finished, by management class and result",
              prometheus::MetricType::Counter);
  for (const auto& [cls, cc] : counters_) {
    if (cls == 0) continue;
    Labels l{{"class", class_label(cls)}};
    out.counter("ibfabric_mad_sent_total", "MADs sent, retries included, by management class", l,
                static_cast<double>(cc.sent));
    out.counter("ibfabric_mad_answered_total", "Answers matched to a request, by management class",
                l, static_cast<double>(cc.answered));
    out.counter("ibfabric_mad_timeouts_total", "Attempts that got no answer in time", l,
                static_cast<double>(cc.timeouts));
    out.counter("ibfabric_mad_retries_total", "Attempts sent again after a timeout or busy answer",
                l, static_cast<double>(cc.retries));
    out.counter("ibfabric_mad_served_total",
                "Requests from other nodes answered by this daemon (the MAD probe responder)", l,
                static_cast<double>(cc.served));
    for (const auto& [result, n] : cc.results) {
      out.counter("ibfabric_mad_requests_total",
                  "MAD requests finished, by management class and result",
                  {{"class", class_label(cls)}, {"result", result}}, static_cast<double>(n));
    }
    for (const auto& [reason, n] : cc.errors) {
      out.counter("ibfabric_mad_errors_total", "MAD errors, by management class and reason",
                  {{"class", class_label(cls)}, {"reason", reason}}, static_cast<double>(n));
    }
    if (!cc.rtt_buckets.empty()) {
      out.histogram("ibfabric_mad_response_seconds",
                    "Time from sending a MAD to its answer, by management class", l, kRttBounds,
                    cc.rtt_buckets, cc.answered, cc.rtt_sum);
    }
  }
  if (auto it = counters_.find(0); it != counters_.end()) {
    for (const auto& [reason, n] : it->second.errors) {
      out.counter("ibfabric_mad_errors_total", "MAD errors, by management class and reason",
                  {{"class", "none"}, {"reason", reason}}, static_cast<double>(n));
    }
  }
  out.counter("ibfabric_mad_unmatched_answers_total",
              "Answers matching no request in flight (mostly late answers after a timeout)", {},
              static_cast<double>(unmatched_));
  out.counter("ibfabric_mad_bad_answers_total",
              "Answers dropped as truncated or not matching the request", {},
              static_cast<double>(bad_responses_));
  out.gauge("ibfabric_mad_in_flight", "MADs sent and not yet answered or timed out", {},
            in_flight_total_);
  out.gauge("ibfabric_mad_queued", "MAD requests waiting for a free slot or rate-limit token", {},
            static_cast<double>(queued_));
  out.gauge("ibfabric_mad_destinations",
            "Destinations the engine holds: every LID it sent to, and the directed routes with "
            "MADs queued or in flight",
            {}, static_cast<double>(dests_.size()));
  for (const auto& [addr, port] : ports_) {
    Labels l{{"device", addr.ca}, {"port", std::to_string(addr.port)}};
    out.gauge("ibfabric_mad_port_open", "1 when the engine has this local umad port open", l,
              port.open() ? 1 : 0);
    out.counter("ibfabric_mad_port_opens_total", "Times the umad port was opened", l,
                static_cast<double>(port.opens));
    out.counter("ibfabric_mad_port_failures_total",
                "Times the umad port failed to open or broke while open", l,
                static_cast<double>(port.failures));
  }
}

}  // namespace detail

std::shared_ptr<Engine> Engine::create(boost::asio::io_context& io, EngineConfig config) {
  // Writing to a dead simulator's socket must be an error, not a fatal signal.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
  return std::make_shared<EngineImpl>(io, std::move(config));
}

}  // namespace ibfabric::mad
