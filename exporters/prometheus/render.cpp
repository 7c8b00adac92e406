#include "exporters/prometheus/render.h"

#include "ibfabric/version.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <malloc.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace ibfabric {

namespace {

// The text exposition format (version 0.0.4), written straight from the snapshots: families
// of one name from several snapshots are grouped under one HELP/TYPE without copying them, and
// numbers are written with std::to_chars (shortest form that reads back exactly).

// Where rendered text goes: a string, or a deflate stream fed in slices so that a large
// snapshot is compressed without ever holding its whole text.
class Deflater;
struct Sink {
  std::string text;
  Deflater* deflater = nullptr;
  void maybe_flush();
};

constexpr std::size_t kSlice = 64 * 1024;

// Raw deflate (no zlib or gzip framing) of independent pieces that can be concatenated: each
// piece starts from a fresh state and ends with a sync flush (byte-aligned, not final), the way
// pigz joins the blocks it compresses in parallel. A gzip member is then a header, the pieces
// in order, one final empty block and a trailer whose CRC-32 is combined from the pieces'.
class Deflater {
 public:
  Deflater() {
    // Level 6, zlib's and Go's default (node_exporter's promhttp); 32 KiB window.
    if (deflateInit2(&z_, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::runtime_error("deflateInit2 failed");
    }
  }
  ~Deflater() { deflateEnd(&z_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  void begin(std::string* out) {
    deflateReset(&z_);
    out_ = out;
    crc_ = crc32(0, nullptr, 0);
    length_ = 0;
  }
  void write(std::string_view data) {
    crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(data.data()), data.size());
    length_ += data.size();
    run(data, Z_NO_FLUSH);
  }
  // Ends the piece: byte-aligned, not final, so another piece may follow.
  void end() { run({}, Z_SYNC_FLUSH); }
  // The final empty block that closes a deflate stream.
  void finish(std::string* out) {
    deflateReset(&z_);
    out_ = out;
    run({}, Z_FINISH);
  }
  uLong crc() const { return crc_; }
  std::uint64_t length() const { return length_; }

 private:
  void run(std::string_view data, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    unsigned char buffer[16384];
    do {
      z_.next_out = buffer;
      z_.avail_out = sizeof buffer;
      int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("deflate failed");
      out_->append(reinterpret_cast<const char*>(buffer), sizeof buffer - z_.avail_out);
    } while (z_.avail_out == 0 || z_.avail_in > 0);
  }

  z_stream z_{};
  std::string* out_ = nullptr;
  uLong crc_ = 0;
  std::uint64_t length_ = 0;
};

void Sink::maybe_flush() {
  if (deflater && text.size() >= kSlice) {
    deflater->write(text);
    text.clear();
  }
}

void append_number(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    out.append(buffer, ec == std::errc() ? end : buffer);
  }
}

void append_sample(std::string& out, const std::string& name, std::string_view suffix,
                   const LabelSet& labels, const char* extra_name, double extra_value,
                   double value) {
  out += name;
  out += suffix;
  const std::string& text = labels.text();
  if (!text.empty() || extra_name) {
    out += '{';
    out += text;
    if (extra_name) {
      if (!text.empty()) out += ',';
      out += extra_name;
      out += "=\"";
      append_number(out, extra_value);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  append_number(out, value);
  out += '\n';
}

const char* type_name(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return "untyped";
  }
}

void append_samples(Sink& sink, const MetricFamily& first, const MetricFamily& family) {
  const std::string& name = first.name;
  std::string& out = sink.text;
  for (std::size_t i = 0; i < family.samples.size(); ++i) {
    const Sample& s = family.samples[i];
    if (first.type == prometheus::MetricType::Histogram) {
      if (i >= family.histograms.size()) break;
      const HistogramValue& h = family.histograms[i];
      for (std::size_t b = 0; b < h.bounds.size(); ++b) {
        append_sample(out, name, "_bucket", *s.labels, "le", h.bounds[b],
                      static_cast<double>(h.bucket_counts[b]));
      }
      append_sample(out, name, "_bucket", *s.labels, "le", std::numeric_limits<double>::infinity(),
                    static_cast<double>(h.count));
      append_sample(out, name, "_sum", *s.labels, nullptr, 0, h.sum);
      append_sample(out, name, "_count", *s.labels, nullptr, 0, static_cast<double>(h.count));
    } else {
      append_sample(out, name, "", *s.labels, nullptr, 0, s.value);
    }
    sink.maybe_flush();
  }
}

void append_family(Sink& sink, const std::vector<const MetricFamily*>& group) {
  const auto& first = *group.front();
  std::string& out = sink.text;
  out += "# HELP ";
  out += first.name;
  out += ' ';
  append_escaped(out, first.help, false);
  out += "\n# TYPE ";
  out += first.name;
  out += ' ';
  out += type_name(first.type);
  out += '\n';
  for (const auto* family : group) {
    if (family->type != first.type) continue;  // a clash: the first type wins
    append_samples(sink, first, *family);
  }
}

// What one scrape writes, in order: runs of families only one snapshot has (cacheable until
// that snapshot is replaced) and everything else (families several snapshots share, like the
// runners' health, and the live self-metrics), rendered per scrape.
struct Group {
  std::vector<const MetricFamily*> families;
  const SnapshotPtr* owner = nullptr;  // set when the name is in this snapshot only
  std::size_t index = 0;               // of the family in its owner
};
struct Piece {
  const SnapshotPtr* owner = nullptr;  // null: rendered per scrape
  std::size_t begin = 0, end = 0;      // owner's families [begin, end)
  std::vector<const Group*> groups;    // owner == null
};

struct Selection {
  std::vector<const SnapshotPtr*> snapshots;
  bool live = true;
};

std::vector<Piece> plan(const std::vector<const SnapshotPtr*>& all, const Selection& selected,
                        const MetricFamilies& live, std::vector<Group>& groups) {
  // How many sources have each name, over every snapshot of the store (not only the selected
  // ones), so that a snapshot's runs are the same in a filtered and an unfiltered scrape.
  std::unordered_map<std::string_view, int> sources;
  for (const auto* s : all) {
    for (const auto& f : (*s)->families) ++sources[f.name];
  }
  for (const auto& f : live) ++sources[f.name];

  std::unordered_map<std::string_view, std::size_t> by_name;
  groups.reserve(sources.size());
  auto add = [&](const MetricFamilies& families, const SnapshotPtr* owner) {
    for (std::size_t i = 0; i < families.size(); ++i) {
      auto [it, inserted] = by_name.emplace(families[i].name, groups.size());
      if (inserted) {
        groups.push_back(Group{{}, sources[families[i].name] == 1 ? owner : nullptr, i});
      }
      groups[it->second].families.push_back(&families[i]);
    }
  };
  for (const auto* s : selected.snapshots) add((*s)->families, s);
  if (selected.live) add(live, nullptr);

  std::vector<Piece> pieces;
  for (const auto& g : groups) {
    Piece* last = pieces.empty() ? nullptr : &pieces.back();
    if (g.owner) {
      if (last && last->owner == g.owner && last->end == g.index) {
        last->end = g.index + 1;
      } else {
        pieces.push_back(Piece{g.owner, g.index, g.index + 1, {}});
      }
    } else if (last && !last->owner) {
      last->groups.push_back(&g);
    } else {
      pieces.push_back(Piece{nullptr, 0, 0, {&g}});
    }
  }
  return pieces;
}

void render_piece(Sink& sink, const Piece& piece) {
  if (piece.owner) {
    const auto& families = (**piece.owner).families;
    std::vector<const MetricFamily*> one(1);
    for (std::size_t i = piece.begin; i < piece.end; ++i) {
      one[0] = &families[i];
      append_family(sink, one);
    }
  } else {
    for (const auto* g : piece.groups) append_family(sink, g->families);
  }
}

MetricFamilies live_families(const std::vector<LiveMetrics>& live) {
  MetricsBuilder self;
  for (const auto& fill : live) fill(self);
  return std::move(self).take();
}

// A snapshot's text is kept for identity scrapes when it is at most this long; a larger one
// (the fabric's: 2.4 KiB per switch port) is rendered again per identity scrape, since
// Prometheus asks for gzip and keeping both would double what the exporter holds.
constexpr std::size_t kIdentityCacheLimit = 1 << 20;

// Above this many bytes of replaced snapshots, hand freed heap back to the kernel: glibc
// keeps it otherwise, and a fabric snapshot is tens of MB.
constexpr std::size_t kTrimAfter = 4 << 20;

}  // namespace

std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live) {
  const MetricFamilies self = live_families(live);
  Selection selection;
  std::vector<const SnapshotPtr*> all;
  for (const auto& s : snapshots) {
    if (s) all.push_back(&s);
  }
  selection.snapshots = all;
  std::vector<Group> groups;
  Sink sink;
  sink.text.reserve(64 * 1024);
  for (const auto& piece : plan(all, selection, self, groups)) render_piece(sink, piece);
  return std::move(sink.text);
}

bool accepts_gzip(std::string_view header) {
  // A list of `coding[;q=VALUE]`; gzip is acceptable when named (or matched by `*`) with a
  // q-value above zero. An explicit `gzip` entry wins over `*`.
  std::optional<double> gzip, any;
  while (!header.empty()) {
    auto comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    auto trim = [](std::string_view v) {
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return v;
    };
    auto semi = item.find(';');
    std::string coding(trim(item.substr(0, semi)));
    for (auto& c : coding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double q = 1;
    while (semi != std::string_view::npos) {
      item = item.substr(semi + 1);
      semi = item.find(';');
      auto param = trim(item.substr(0, semi));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        std::string value(trim(param.substr(2)));
        char* end = nullptr;
        q = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(q >= 0)) q = 0;  // malformed: not accepted
      }
    }
    if (coding == "gzip" || coding == "x-gzip") {
      gzip = q;
    } else if (coding == "*") {
      any = q;
    }
  }
  if (gzip) return *gzip > 0;
  return any && *any > 0;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: %XX and '+' for a space. False on a malformed escape.
bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

}  // namespace

std::string parse_collector_filter(std::string_view query, CollectorFilter& out) {
  std::string key, value;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    if (!url_decode(pair.substr(0, eq), key) ||
        !url_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                    value)) {
      return "malformed %-escape in the query string";
    }
    if (key != "collect[]" && key != "exclude[]")
      continue;  // others are ignored, as node_exporter does
    if (value.empty()) return "empty collector name in " + key;
    (key == "collect[]" ? out.collect : out.exclude).push_back(value);
  }
  if (!out.collect.empty() && !out.exclude.empty()) {
    return "collect[] and exclude[] cannot be used together";
  }
  return {};
}

struct Exporter::Segment {
  std::weak_ptr<const Snapshot> snapshot;
  const Snapshot* key = nullptr;
  std::size_t begin = 0, end = 0;
  bool deflated_ready = false;
  std::string deflated;  // raw deflate, sync-flushed (see Deflater)
  uLong crc = 0;
  std::uint64_t length = 0;
  bool text_ready = false;
  std::string text;
};

Exporter::Exporter() = default;
Exporter::~Exporter() = default;

std::size_t Exporter::cached_bytes() const {
  std::size_t n = 0;
  for (const auto& s : cache_) n += s.deflated.capacity() + s.text.capacity();
  return n;
}

ScrapeResponse Exporter::scrape(const ScrapeRequest& request, const NamedSnapshots& snapshots,
                                const std::vector<std::string>& collectors,
                                const std::vector<LiveMetrics>& live) {
  ScrapeResponse response;
  CollectorFilter filter;
  if (auto error = parse_collector_filter(request.query, filter); !error.empty()) {
    response.status = 400;
    response.body = error + "\n";
    return response;
  }
  auto listed = [&](const std::vector<std::string>& names, std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const auto* names : {&filter.collect, &filter.exclude}) {
    for (const auto& name : *names) {
      if (name == "self" || listed(collectors, name)) continue;
      std::string known;
      for (const auto& c : collectors) known += (known.empty() ? "" : ", ") + c;
      response.status = 400;
      response.body = "unknown collector \"" + name + "\" in " +
                      (names == &filter.collect ? "collect[]" : "exclude[]") +
                      ": not an enabled collector of this daemon (enabled: " + known +
                      "; \"self\" names the daemon's own metrics)\n";
      return response;
    }
  }
  auto wanted = [&](std::string_view name) {
    if (!filter.collect.empty()) return listed(filter.collect, name);
    return !listed(filter.exclude, name);
  };

  // Forget what was derived from replaced snapshots.
  std::size_t released = 0;
  std::erase_if(cache_, [&](const Segment& s) {
    bool current = std::any_of(snapshots.begin(), snapshots.end(),
                               [&](const auto& e) { return e.second.get() == s.key; });
    bool gone = s.snapshot.expired() || !current;
    if (gone) released += s.length;
    return gone;
  });
  if (released >= kTrimAfter) malloc_trim(0);

  std::vector<const SnapshotPtr*> all;
  Selection selection;
  selection.live = wanted("self");
  for (const auto& [name, snapshot] : snapshots) {
    if (!snapshot) continue;
    all.push_back(&snapshot);
    if (wanted(name)) selection.snapshots.push_back(&snapshot);
  }
  const MetricFamilies self = selection.live ? live_families(live) : MetricFamilies{};
  std::vector<Group> groups;
  auto pieces = plan(all, selection, self, groups);

  auto segment = [&](const Piece& p) -> Segment& {
    for (auto& s : cache_) {
      if (s.key == p.owner->get() && s.begin == p.begin && s.end == p.end) return s;
    }
    auto& s = cache_.emplace_back();
    s.snapshot = *p.owner;
    s.key = p.owner->get();
    s.begin = p.begin;
    s.end = p.end;
    return s;
  };

  if (!accepts_gzip(request.accept_encoding)) {
    Sink sink;
    for (const auto& p : pieces) {
      if (!p.owner) {
        render_piece(sink, p);
        continue;
      }
      Segment& s = segment(p);
      if (s.text_ready) {
        sink.text += s.text;
        continue;
      }
      std::size_t start = sink.text.size();
      render_piece(sink, p);
      s.length = sink.text.size() - start;
      if (s.length <= kIdentityCacheLimit) {
        s.text.assign(sink.text, start, std::string::npos);
        s.text_ready = true;
      }
    }
    response.body = std::move(sink.text);
    return response;
  }

  // gzip: a header, each piece's deflate in order, a final empty block, CRC-32 and length.
  std::string& out = response.body;
  out.assign("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  Deflater deflater;
  uLong crc = crc32(0, nullptr, 0);
  std::uint64_t length = 0;
  for (const auto& p : pieces) {
    if (!p.owner) {
      Sink sink;
      sink.deflater = &deflater;
      deflater.begin(&out);
      render_piece(sink, p);
      deflater.write(sink.text);
      deflater.end();
      crc = crc32_combine(crc, deflater.crc(), static_cast<z_off_t>(deflater.length()));
      length += deflater.length();
      continue;
    }
    Segment& s = segment(p);
    if (!s.deflated_ready) {
      Sink sink;
      sink.deflater = &deflater;
      deflater.begin(&s.deflated);
      render_piece(sink, p);
      deflater.write(sink.text);
      deflater.end();
      s.deflated.shrink_to_fit();
      s.crc = deflater.crc();
      s.length = deflater.length();
      s.deflated_ready = true;
    }
    out += s.deflated;
    crc = crc32_combine(crc, s.crc, static_cast<z_off_t>(s.length));
    length += s.length;
  }
  deflater.finish(&out);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((crc >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((length >> (8 * i)) & 0xff);
  response.gzip = true;
  return response;
}

namespace {

// /proc/self/stat fields after the command name, which may itself hold spaces and ')'.
std::vector<std::string> proc_self_stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> fields;
  auto close = line.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;  // fields[0] is "state" (field 3 of proc(5))
}

// /proc/stat is long and btime never changes: read it once.
double boot_time_seconds() {
  static const double boot_time = [] {
    std::ifstream in("/proc/stat");
    for (std::string key; in >> key;) {
      if (key == "btime") {
        double value = 0;
        in >> value;
        return value;
      }
      in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return 0.0;
  }();
  return boot_time;
}

// Since Linux 6.2 the size of /proc/self/fd is the number of open descriptors: one stat()
// instead of listing the directory, which makes the kernel build an entry per descriptor and
// was most of what serving a scrape cost. Older kernels say 0 there: list it.
double open_fds() {
  struct stat st {};
  if (::stat("/proc/self/fd", &st) == 0 && st.st_size > 0) return static_cast<double>(st.st_size);
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  // The iterator itself holds one descriptor while counting.
  return fds > 0 ? fds - 1 : 0;
}

}  // namespace

void add_process_metrics(MetricsBuilder& out) {
  const auto fields = proc_self_stat_fields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5) numbering: utime 14, stime 15, starttime 22, vsize 23, rss 24; fields[0] is 3.
  auto field = [&](int number) {
    return std::stod(fields.at(static_cast<std::size_t>(number - 3)));
  };
  if (fields.size() >= 22) {
    out.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", {},
                (field(14) + field(15)) / ticks);
    out.gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.", {},
              boot_time_seconds() + field(22) / ticks);
    out.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {}, field(23));
    out.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
              field(24) * page);
  }
  out.gauge("process_open_fds", "Number of open file descriptors.", {}, open_fds());
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.gauge("process_max_fds", "Maximum number of open file descriptors.", {},
              static_cast<double>(limit.rlim_cur));
  }
}

void add_build_info(MetricsBuilder& out) {
  out.info("ibfabric_build_info",
           "A metric with a constant value of 1 labelled by the build of ibfabricd.",
           {{"version", kVersion}, {"build_type", kBuildType}, {"compiler", kCompiler}});
}

}  // namespace ibfabric
