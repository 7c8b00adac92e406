#include "exporters/prometheus/render.h"
#include "core/metrics.h"
#include "core/text_format.h"
#include "exporters/prometheus/self_metrics.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <future>
#include <map>

namespace ibfabric {
namespace {

SnapshotPtr snapshot(MetricsBuilder builder) {
  auto s = std::make_shared<Snapshot>();
  s->families = std::move(builder).take();
  return s;
}

TEST(MetricsBuilder, KeepsSamplesOfAFamilyTogether) {
  MetricsBuilder b;
  b.gauge("a", "help a", {{"x", "1"}}, 1);
  b.counter("b_total", "help b", {}, 2);
  b.gauge("a", "help a", {{"x", "2"}}, 3);
  auto families = std::move(b).take();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "a");
  ASSERT_EQ(families[0].samples.size(), 2u);
  EXPECT_EQ(families[0].samples[1].value, 3);
  EXPECT_EQ(families[1].samples[0].value, 2);
}

TEST(MetricsBuilder, RejectsOneNameWithTwoTypes) {
  MetricsBuilder b;
  b.gauge("a", "", {}, 1);
  EXPECT_THROW(b.counter("a", "", {}, 1), std::logic_error);
}

TEST(Render, MergesFamiliesAcrossSnapshotsAndEscapesLabels) {
  MetricsBuilder one;
  one.gauge("ibfabric_collector_success", "ok", {{"collector", "sysfs"}}, 1);
  one.info("ibfabric_x_info", "info", {{"desc", "node \"a\"\\b\nc"}});
  MetricsBuilder two;
  two.gauge("ibfabric_collector_success", "ok", {{"collector", "ports"}}, 0);
  std::string text = render_text({snapshot(std::move(one)), snapshot(std::move(two))}, {});
  EXPECT_EQ(text,
            "# HELP ibfabric_collector_success ok\n"
            "# TYPE ibfabric_collector_success gauge\n"
            "ibfabric_collector_success{collector=\"sysfs\"} 1\n"
            "ibfabric_collector_success{collector=\"ports\"} 0\n"
            "# HELP ibfabric_x_info info\n"
            "# TYPE ibfabric_x_info gauge\n"
            "ibfabric_x_info{desc=\"node \\\"a\\\"\\\\b\\nc\"} 1\n");
}

TEST(Render, CountersKeepExactIntegersUpTo2To53) {
  MetricsBuilder b;
  b.counter("c_total", "c", {}, 9007199254740992.0);  // 2^53
  b.counter("d_total", "d", {}, 4294967295.0 * 4);
  std::string text = render_text({snapshot(std::move(b))}, {});
  EXPECT_NE(text.find("c_total 9007199254740992\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_total 17179869180\n"), std::string::npos) << text;
}

TEST(Render, HistogramHasCumulativeBucketsAndInf) {
  MetricsBuilder b;
  b.histogram("rtt_seconds", "rtt", {{"peer", "1"}}, {0.001, 0.01}, {2, 5}, 7, 0.05);
  std::string text = render_text({snapshot(std::move(b))}, {});
  EXPECT_NE(text.find("rtt_seconds_bucket{peer=\"1\",le=\"0.001\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rtt_seconds_bucket{peer=\"1\",le=\"+Inf\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("rtt_seconds_count{peer=\"1\"} 7\n"), std::string::npos);
}

TEST(Render, LiveMetricsComeAfterSnapshots) {
  MetricsBuilder b;
  b.gauge("first", "f", {}, 1);
  std::string text = render_text({snapshot(std::move(b))},
                                 {[](MetricsBuilder& out) { out.gauge("second", "s", {}, 2); }});
  EXPECT_LT(text.find("first 1"), text.find("second 2"));
}

TEST(ProcessMetrics, ReportsThisProcess) {
  std::string text = render_text({}, {[](MetricsBuilder& out) { add_process_metrics(out); }});
  for (const char* name :
       {"process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ",
        "process_max_fds ", "process_start_time_seconds ", "process_virtual_memory_bytes "}) {
    EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name << "\n" << text;
  }
}

TEST(MetricsBuilder, InternsLabelSetsAcrossFamilies) {
  MetricsBuilder b;
  b.counter("a_total", "a", {{"node_guid", "0x1"}, {"port", "1"}}, 1);
  b.counter("b_total", "b", {{"node_guid", "0x1"}, {"port", "1"}}, 2);
  b.counter("b_total", "b", {{"node_guid", "0x1"}, {"port", "2"}}, 3);
  auto families = std::move(b).take();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].samples[0].labels, families[1].samples[0].labels);
  EXPECT_NE(families[1].samples[0].labels, families[1].samples[1].labels);
  EXPECT_EQ(families[1].samples[1].labels->text(), "node_guid=\"0x1\",port=\"2\"");
}

// The text of a family's raw deflate piece (deflate_family()).
std::string inflate_raw(const DeflatedText& piece) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, -MAX_WBITS), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.deflated.data()));
  z.avail_in = static_cast<uInt>(piece.deflated.size());
  std::string out;
  char buffer[4096];
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    EXPECT_NE(inflate(&z, Z_SYNC_FLUSH), Z_STREAM_ERROR);
    out.append(buffer, sizeof buffer - z.avail_out);
  } while (z.avail_out == 0 || z.avail_in > 0);
  inflateEnd(&z);
  return out;
}

// A numbered family (the fabric's per-VL series: a port's set and the VL) renders as if the
// number were the last label of the sample's set, whichever way its samples travel: taken out
// part by part, added to another builder, merged, compressed. Its samples need a number.
TEST(MetricsBuilder, ANumberedFamilyRendersItsNumberAsTheSamplesLastLabel) {
  MetricsBuilder whole;
  whole.counter("w_total", "w", {{"node_guid", "0x1"}, {"port", "2"}, {"vl", "3"}}, 7);
  whole.counter("w_total", "w", {{"node_guid", "0x1"}, {"port", "2"}, {"vl", "0"}}, 8);
  whole.counter("w_total", "w", {{"vl", "65535"}}, 9);  // no comma after an empty set
  whole.counter("w_total", "w", {{"node_guid", "0x2"}, {"port", "1"}, {"vl", "14"}}, 10);
  const std::string want = render_text({snapshot(std::move(whole))}, {});

  MetricsBuilder numbered;
  auto id = numbered.numbered_family("w_total", "w", prometheus::MetricType::Counter, "vl");
  const LabelSet* port = numbered.labels({{"node_guid", "0x1"}, {"port", "2"}});
  numbered.add_numbered(id, port, 3, 7);
  numbered.add_numbered(id, port, 0, 8);
  auto taken = numbered.take_samples([](auto, const MetricFamily&) { return true; });
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].second.number_label, "vl");
  EXPECT_EQ(taken[0].second.numbers, (std::vector<std::uint16_t>{3, 0}));
  numbered.add_numbered(id, numbered.labels({}), 65535, 9);
  MetricsBuilder later;
  later.numbered_family("w_total", "w", prometheus::MetricType::Counter, "vl");
  later.add_numbered(0, later.labels({{"node_guid", "0x2"}, {"port", "1"}}), 14, 10);
  MetricsBuilder joined;
  joined.add_family(taken[0].second);
  MetricFamilies families = std::move(joined).take();
  merge_families(families, std::move(numbered).take());
  merge_families(families, std::move(later).take());
  ASSERT_EQ(families.size(), 1u);
  ASSERT_EQ(families[0].numbers.size(), families[0].samples.size());
  auto result = std::make_shared<Snapshot>();
  result->families = families;
  EXPECT_EQ(render_text({result}, {}), want);
  Deflater deflater;
  std::string scratch;
  EXPECT_EQ(inflate_raw(*deflate_family(families[0], deflater, scratch)), want);

  MetricsBuilder wrong;
  auto w = wrong.numbered_family("w_total", "w", prometheus::MetricType::Counter, "vl");
  EXPECT_THROW(wrong.add(w, wrong.labels({}), 1), std::logic_error);
  EXPECT_THROW(wrong.counter("w_total", "w", {{"vl", "1"}}, 1), std::logic_error);
  EXPECT_THROW(wrong.numbered_family("w_total", "w", prometheus::MetricType::Counter, "lane"),
               std::logic_error);
  EXPECT_THROW(wrong.numbered_family("h", "h", prometheus::MetricType::Histogram, "vl"),
               std::logic_error);
  wrong.add_numbered(w, wrong.labels({}), 1, 1);
  MetricsBuilder plain;
  plain.counter("w_total", "w", {{"vl", "1"}}, 1);
  auto unnumbered = plain.family("w_total", "w", prometheus::MetricType::Counter);
  EXPECT_THROW(plain.add_numbered(unnumbered, plain.labels({}), 1, 1), std::logic_error);
  auto mixed = std::move(plain).take();
  EXPECT_THROW(merge_families(mixed, std::move(wrong).take()), std::logic_error);
}

TEST(MetricsBuilder, DeclareOncePathRendersLikeThePerSampleCalls) {
  MetricsBuilder slow;
  slow.gauge("x", "help", {{"a", "1"}}, 1);
  slow.gauge("x", "help", {{"a", "2"}}, 2);
  MetricsBuilder fast;
  auto id = fast.family("x", "help", prometheus::MetricType::Gauge);
  fast.add(id, fast.labels({{"a", "1"}}), 1);
  fast.add(id, fast.labels({{"a", "2"}}), 2);
  EXPECT_EQ(render_text({snapshot(std::move(slow))}, {}),
            render_text({snapshot(std::move(fast))}, {}));
  MetricsBuilder clash;
  clash.family("y", "", prometheus::MetricType::Gauge);
  EXPECT_THROW(clash.family("y", "", prometheus::MetricType::Counter), std::logic_error);
}

// A collector's cache (fabric: label sets and info families kept until the topology changes):
// what a later builder takes from it renders like what it builds itself, and the result keeps
// the cache's arenas alive after the cache is gone (ASan would see a set freed under it).
TEST(MetricsBuilder, ReusesCachedFamiliesAndLabelSetsAndKeepsThemAlive) {
  auto cache_arena = std::make_shared<LabelArena>();
  const LabelSet* port = &cache_arena->sets.emplace_back(label_text({{"port", "1"}}));
  MetricFamilies cached;
  {
    MetricsBuilder info;
    info.info("x_info", "info", {{"name", "leaf \"1\""}});
    cached = std::move(info).take();
  }
  auto shown = std::make_shared<Snapshot>();
  {
    MetricsBuilder reuse;
    reuse.add_family(cached[0]);
    reuse.adopt(cache_arena);
    reuse.counter("c_total", "c", port, 5);
    reuse.add_family(cached[0]);  // the same family twice: one family, two samples
    shown->families = std::move(reuse).take();
  }
  ASSERT_EQ(shown->families.size(), 2u);
  EXPECT_EQ(shown->families[0].samples.size(), 2u);
  EXPECT_EQ(shown->families[1].samples[0].labels, port);
  MetricsBuilder direct;
  direct.info("x_info", "info", {{"name", "leaf \"1\""}});
  direct.counter("c_total", "c", {{"port", "1"}}, 5);
  direct.info("x_info", "info", {{"name", "leaf \"1\""}});
  cached.clear();
  cache_arena.reset();
  port = nullptr;
  EXPECT_EQ(render_text({shown}, {}), render_text({snapshot(std::move(direct))}, {}));
}

// A family whose samples all use the builder's own label sets does not keep an adopted arena:
// a small family of a shown snapshot must not hold a collector's replaced label cache.
TEST(MetricsBuilder, AnAdoptedArenaStaysOnlyWithTheFamiliesThatUseIt) {
  auto cache_arena = std::make_shared<LabelArena>();
  const LabelSet* port = &cache_arena->sets.emplace_back(label_text({{"port", "1"}}));
  MetricsBuilder b;
  b.adopt(cache_arena);
  b.counter("per_port_total", "uses the cache", port, 5);
  b.gauge("per_switch", "own labels only", {{"switch", "a"}}, 1);
  auto families = std::move(b).take();
  std::weak_ptr<LabelArena> alive = cache_arena;
  cache_arena.reset();
  ASSERT_EQ(families.size(), 2u);
  auto per_switch = families[1];
  families.pop_back();
  EXPECT_FALSE(alive.expired());  // per_port_total holds it
  families.clear();
  EXPECT_TRUE(alive.expired()) << "per_switch kept the adopted arena";
  auto shown = std::make_shared<Snapshot>();
  shown->families.push_back(per_switch);
  EXPECT_EQ(
      render_text({shown}, {}),
      "# HELP per_switch own labels only\n# TYPE per_switch gauge\nper_switch{switch=\"a\"} 1\n");
}

TEST(LabelSet, ReadsBackEscapedValues) {
  MetricsBuilder b;
  Labels labels{{"desc", "node \"a\"\\b\nc"}, {"empty", ""}, {"eq", "a=b,c"}};
  EXPECT_EQ(b.labels(labels)->labels(), labels);
  EXPECT_EQ(b.labels(labels)->get("eq"), "a=b,c");
  EXPECT_EQ(b.labels({})->text(), "");
  EXPECT_TRUE(b.labels({})->labels().empty());
}

TEST(MergeFamilies, ConcatenatesSamplesAndKeepsTheirLabelsAlive) {
  MetricFamilies into;
  {
    MetricsBuilder one;
    one.gauge("shared", "s", {{"c", "one"}}, 1);
    into = std::move(one).take();
  }
  MetricsBuilder two;
  two.gauge("shared", "s", {{"c", "two"}}, 2);
  two.histogram("h_seconds", "h", {{"c", "two"}}, {1}, {1}, 2, 3);
  merge_families(into, std::move(two).take());
  ASSERT_EQ(into.size(), 2u);
  ASSERT_EQ(into[0].samples.size(), 2u);
  EXPECT_EQ(into[0].samples[1].labels->text(), "c=\"two\"");
  EXPECT_EQ(into[0].arenas.size(), 2u);
  ASSERT_EQ(into[1].histograms.size(), 1u);
  EXPECT_EQ(into[1].histograms[0].sum, 3);
}

// Inflates a gzip body; fails the test on anything but exactly one complete gzip member.
std::string gunzip(const std::string& body) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK) {
    char buffer[4096];
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << z.msg;
  EXPECT_EQ(z.avail_in, 0u) << "bytes after the gzip member";
  inflateEnd(&z);
  return out;
}

struct ExporterFixture {
  ExporterFixture() {
    MetricsBuilder a;
    a.gauge("ibfabric_collector_success", "ok", {{"collector", "sysfs"}}, 1);
    a.counter("ibfabric_sysfs_x_total", "x", {{"port", "1"}}, 5);
    a.info("ibfabric_sysfs_y_info", "y", {{"desc", "a\"b"}});
    MetricsBuilder f;
    f.gauge("ibfabric_collector_success", "ok", {{"collector", "fabric"}}, 1);
    for (int port = 1; port <= 3000; ++port) {
      Labels l{{"node_guid", hex_guid(0x2c9000000000ull + static_cast<unsigned>(port / 36))},
               {"port", std::to_string(port % 36 + 1)}};
      f.counter("ibfabric_fabric_port_receive_bytes_total", "rx", l, port * 4096.0);
      f.counter("ibfabric_fabric_port_transmit_bytes_total", "tx", l, port * 1e12);
    }
    f.histogram("ibfabric_fabric_h_seconds", "h", {}, {0.5}, {1}, 2, 0.75);
    snapshots = {{"sysfs", snapshot(std::move(a))}, {"fabric", snapshot(std::move(f))}};
  }
  std::vector<SnapshotPtr> pointers() const { return {snapshots[0].second, snapshots[1].second}; }
  // The whole response, its stream read to the end.
  ScrapeResponse scrape(std::string_view query, std::string_view encoding) {
    auto response = exporter.scrape({query, encoding}, snapshots, {"sysfs", "fabric"}, live);
    response.body = read_body(response);
    response.stream.reset();
    return response;
  }
  Exporter::NamedSnapshots snapshots;
  double requests = 1;  // a live value the test changes between scrapes
  std::vector<LiveMetrics> live{[this](MetricsBuilder& out) {
    out.counter("ibfabric_http_requests_total", "live", {}, requests);
  }};
  Exporter exporter;
};

// A large result compressed part by part while it is built (the fabric sweep at scale,
// docs/design.md, "Memory of the fabric sweep"): the families keep their place and take more
// samples after each part, and their joined texts (first part with the header) render, and
// scrape as gzip, exactly as the samples would.
TEST(Exporter, AFamilyCompressedPartByPartScrapesAsItsSamplesDo) {
  MetricsBuilder whole, parts;
  std::map<MetricsBuilder::FamilyId, DeflatedText> joined;
  Deflater deflater;
  std::string scratch;
  auto seal = [&](bool last) {
    auto taken = parts.take_samples([&](MetricsBuilder::FamilyId id, const MetricFamily& f) {
      return joined.contains(id) || (!last && f.samples.size() >= 100);
    });
    for (const auto& [id, family] : taken) {
      bool first = !joined.contains(id);
      append_deflated(joined[id], *deflate_family(family, deflater, scratch, first));
    }
    return taken.size();
  };
  std::size_t taken = 0;
  for (auto* b : {&whole, &parts}) b->gauge("ibfabric_fabric_shard_info", "s", {}, 1);
  for (int port = 1; port <= 3000; ++port) {
    Labels l{{"node_guid", hex_guid(0x2c9000000000ull + static_cast<unsigned>(port / 36))},
             {"port", std::to_string(port % 36 + 1)}};
    for (auto* b : {&whole, &parts}) {
      b->counter("ibfabric_fabric_port_receive_bytes_total", "rx", l, port * 4096.0);
      b->counter("ibfabric_fabric_port_transmit_bytes_total", "tx", l, port * 1e12);
      if (port % 50 == 0) b->gauge("ibfabric_fabric_few", "few", l, port);
    }
    if (port % 700 == 0) taken += seal(false);
  }
  taken += seal(true);
  EXPECT_EQ(taken, 10u);  // rx and tx at 700, 1400, 2100 and 2800, and their rest
  for (auto& [id, text] : joined) {
    parts.set_text(id, std::make_shared<const DeflatedText>(std::move(text)));
  }
  EXPECT_EQ(parts.samples(), 61u);  // shard_info and the 60 of "few", never taken
  auto split = snapshot(std::move(parts));
  ASSERT_EQ(split->families.size(), 4u);
  EXPECT_TRUE(split->families[1].text && split->families[1].samples.empty());
  EXPECT_FALSE(split->families[3].text);
  auto all = snapshot(std::move(whole));
  EXPECT_EQ(render_text({split}, {}), render_text({all}, {}));

  Exporter exporter;
  auto scrape = [&](SnapshotPtr s, std::string_view encoding) {
    auto response = exporter.scrape({"", encoding}, {{"fabric", s}}, {"fabric"}, {});
    response.body = read_body(response);
    return response.body;
  };
  EXPECT_EQ(gunzip(scrape(split, "gzip")), scrape(all, ""));
  EXPECT_EQ(scrape(split, ""), scrape(all, ""));

  MetricsBuilder more;
  more.gauge("g", "g", {}, 1);
  EXPECT_THROW(more.set_text(0, std::make_shared<const DeflatedText>()), std::logic_error);
}

// What prepare() makes of the fixture's fabric snapshot, and whether it let go of the one it was
// given.
struct Prepared {
  SnapshotPtr ready;
  bool given_released = false;
};
Prepared prepare(ExporterFixture& f) {
  // prepare() frees the samples it compresses: like the collector runner, the test gives it a
  // snapshot of its own (tests hold the fixture's to compare with).
  auto moved = std::make_shared<Snapshot>(*f.snapshots[1].second);
  f.snapshots[1].second.reset();
  std::weak_ptr<const Snapshot> given = moved;
  std::promise<SnapshotPtr> ready;
  f.exporter.prepare(f.snapshots, "fabric", std::move(moved), {"ibfabric_http_requests_total"},
                     [&](SnapshotPtr s) { ready.set_value(std::move(s)); });
  Prepared out;
  out.ready = ready.get_future().get();
  out.given_released = given.expired();
  return out;
}

TEST(Exporter, GzipInflatesToTheIdentityTextAndIsCachedPerSnapshot) {
  ExporterFixture f;
  auto identity = f.scrape("", "");
  ASSERT_EQ(identity.status, 200u);
  EXPECT_FALSE(identity.gzip);
  EXPECT_EQ(identity.body, render_text(f.pointers(), f.live));
  auto gz = f.scrape("", "gzip");
  ASSERT_TRUE(gz.gzip);
  EXPECT_LT(gz.body.size() * 5, identity.body.size());
  EXPECT_EQ(gunzip(gz.body), identity.body);

  // Again: the snapshots' deflate comes from the cache, the live part is new.
  std::size_t cached = f.exporter.cached_bytes();
  EXPECT_GT(cached, 0u);
  f.requests = 4;
  auto again = f.scrape("", "deflate, gzip;q=0.8");
  ASSERT_TRUE(again.gzip);
  EXPECT_EQ(f.exporter.cached_bytes(), cached);
  EXPECT_EQ(gunzip(again.body), render_text(f.pointers(), f.live));
  EXPECT_NE(gunzip(again.body).find("ibfabric_http_requests_total 4\n"), std::string::npos);

  // A replaced snapshot is rendered anew and the old one's cache is dropped.
  MetricsBuilder b;
  b.gauge("ibfabric_collector_success", "ok", {{"collector", "fabric"}}, 0);
  b.gauge("ibfabric_fabric_new", "n", {}, 7);
  f.snapshots[1].second = snapshot(std::move(b));
  auto replaced = gunzip(f.scrape("", "gzip").body);
  EXPECT_EQ(replaced.find("receive_bytes"), std::string::npos);
  EXPECT_NE(replaced.find("ibfabric_fabric_new 7\n"), std::string::npos);
  EXPECT_LT(f.exporter.cached_bytes(), cached);
  EXPECT_EQ(f.scrape("", "").body.find("receive_bytes"), std::string::npos);
}

// A scrape is one snapshot per collector however long its client takes: replacing a snapshot
// in the store mid-stream changes nothing in a body already started, in text or gzip.
TEST(Exporter, AStreamKeepsTheSnapshotsItStartedWith) {
  for (const char* encoding : {"", "gzip"}) {
    ExporterFixture f;
    const std::string before = render_text(f.pointers(), f.live);
    auto response = f.exporter.scrape({"", encoding}, f.snapshots, {"sysfs", "fabric"}, f.live);
    ASSERT_TRUE(response.stream);
    std::string body;
    ASSERT_TRUE(response.stream->next(body));
    // A sweep ends: the store now has another fabric snapshot, the old one only the stream.
    MetricsBuilder b;
    b.gauge("ibfabric_collector_success", "ok", {{"collector", "fabric"}}, 0);
    f.snapshots[1].second = snapshot(std::move(b));
    while (response.stream->next(body)) {
    }
    EXPECT_EQ(response.gzip ? gunzip(body) : body, before) << encoding;
  }
}

// Each step of a stream is bounded: a slice of about 64 KiB of body (and as much text
// compressed), never the whole scrape.
TEST(Exporter, AStreamGoesASliceAtATime) {
  ExporterFixture f;
  MetricsBuilder big;
  for (int port = 0; port < 20000; ++port) {
    big.counter("ibfabric_fabric_port_x_total", "x", {{"port", std::to_string(port)}}, port);
  }
  f.snapshots[1].second = snapshot(std::move(big));
  const std::string text = render_text(f.pointers(), f.live);
  for (const char* encoding : {"", "gzip", "prepared", "prepared gzip"}) {
    if (encoding == std::string_view("prepared")) f.snapshots[1].second = prepare(f).ready;
    const bool gzip = std::string_view(encoding).ends_with("gzip");
    auto response =
        f.exporter.scrape({"", gzip ? "gzip" : ""}, f.snapshots, {"sysfs", "fabric"}, f.live);
    std::string body, step;
    int steps = 0;
    while (response.stream->next(step)) {
      EXPECT_LE(step.size(), 64u * 1024 + 256) << encoding;
      body += step;
      step.clear();
      ++steps;
    }
    EXPECT_EQ(response.gzip ? gunzip(body) : body, text) << encoding;
    // A kept text's gzip is copied as it is: 20,000 samples' fit in a slice or two.
    if (encoding != std::string_view("prepared gzip")) {
      EXPECT_GT(steps, 3) << encoding;
    }
  }
}

// prepare() compresses a large snapshot ahead of time and shows its large families as that
// text: no samples are kept of them, every scrape (text, gzip, filtered) reads exactly as from
// the samples, and the first gzip scrape compresses nothing of the fabric.
TEST(Exporter, PrepareKeepsLargeFamiliesAsTheirCompressedText) {
  ExporterFixture f;
  const auto original = f.snapshots[1].second;
  const std::string text = render_text(f.pointers(), f.live);
  const std::string fabric_only = f.scrape("collect[]=fabric", "").body;
  auto prepared = prepare(f);
  EXPECT_TRUE(prepared.given_released);
  ASSERT_TRUE(prepared.ready);
  std::size_t deflated = 0;
  for (const auto& family : prepared.ready->families) {
    bool large = family.name.find("_bytes_total") != std::string::npos;
    EXPECT_EQ(family.text != nullptr, large) << family.name;
    EXPECT_EQ(family.samples.empty(), large) << family.name;
    if (family.text) deflated += family.text->deflated.size();
  }
  EXPECT_GT(deflated, 10000u);  // 6,000 samples, compressed
  f.snapshots[1].second = prepared.ready;

  const std::size_t cached = f.exporter.cached_bytes();
  EXPECT_EQ(render_text(f.pointers(), f.live), text);
  EXPECT_EQ(f.scrape("", "").body, text);
  EXPECT_EQ(gunzip(f.scrape("", "gzip").body), text);
  EXPECT_EQ(f.scrape("collect[]=fabric", "").body, fabric_only);
  EXPECT_EQ(gunzip(f.scrape("collect[]=fabric", "gzip").body), fabric_only);
  // Only the small sysfs run was compressed by the scrapes.
  EXPECT_LT(f.exporter.cached_bytes() - cached, 1000u);
}

// A family kept as text still renders when another snapshot later has a family of that name:
// one HELP/TYPE, then the kept text without its own header, then the other's samples.
TEST(Exporter, AKeptFamilySharedWithAnotherSnapshotRendersUnderOneHeader) {
  ExporterFixture f;
  const auto original = f.snapshots[1].second;
  auto prepared = prepare(f);
  MetricsBuilder a;
  a.gauge("ibfabric_collector_success", "ok", {{"collector", "sysfs"}}, 1);
  a.counter("ibfabric_fabric_port_receive_bytes_total", "rx", {{"port", "x"}}, 3);
  f.snapshots[0].second = snapshot(std::move(a));
  const std::string expected = render_text({f.snapshots[0].second, original}, f.live);
  EXPECT_EQ(expected.find("# TYPE ibfabric_fabric_port_receive_bytes_total counter"),
            expected.rfind("# TYPE ibfabric_fabric_port_receive_bytes_total counter"));
  f.snapshots[1].second = prepared.ready;
  EXPECT_EQ(f.scrape("", "").body, expected);
  EXPECT_EQ(gunzip(f.scrape("", "gzip").body), expected);
}

// `family` as its compressed text (MetricFamily::text, no samples), as a collector holds a
// large family it shows unchanged in many snapshots (the fabric's node and cable info).
MetricFamily compressed_family(const MetricFamily& family) {
  MetricFamily out;
  out.name = family.name;
  out.help = family.help;
  out.type = family.type;
  Deflater deflater;
  std::string text;
  out.text = deflate_family(family, deflater, text);
  return out;
}

// A collector's families held as their compressed text (compressed_family: the fabric's node
// and cable info, kept per topology) are shown like their samples, prepared or not, whatever
// their type, and also when another snapshot shares the name (ibfabric_collector_success);
// prepare() passes that text on as it is instead of compressing it again.
TEST(Exporter, ACompressedFamilyRendersLikeItsSamples) {
  ExporterFixture f;
  const std::string text = render_text(f.pointers(), f.live);
  auto held = std::make_shared<Snapshot>(*f.snapshots[1].second);
  std::map<std::string, std::shared_ptr<const DeflatedText>> kept;
  for (auto& family : held->families) {
    family = compressed_family(family);
    kept[family.name] = family.text;
  }
  ASSERT_EQ(kept.size(), 4u);  // a gauge, two counters and a histogram
  f.snapshots[1].second = held;
  EXPECT_EQ(render_text(f.pointers(), f.live), text);
  EXPECT_EQ(f.scrape("", "").body, text);
  EXPECT_EQ(gunzip(f.scrape("", "gzip").body), text);

  auto prepared = prepare(f);
  for (const auto& family : prepared.ready->families) {
    EXPECT_EQ(family.text, kept[family.name]) << family.name;
  }
  f.snapshots[1].second = prepared.ready;
  EXPECT_EQ(f.scrape("", "").body, text);
  EXPECT_EQ(gunzip(f.scrape("", "gzip").body), text);
}

TEST(MetricsBuilder, ACompressedFamilyIsAddedWholeAndNeverMerged) {
  MetricsBuilder info;
  info.info("x_info", "info", {{"name", "leaf-1"}});
  info.info("x_info", "info", {{"name", "leaf-2"}});
  const MetricFamily compressed = compressed_family(std::move(info).take()[0]);
  EXPECT_TRUE(compressed.samples.empty());

  MetricsBuilder b;
  b.add_family(compressed);
  b.gauge("y", "y", {}, 1);
  EXPECT_THROW(b.add_family(compressed), std::logic_error);  // twice
  auto families = std::move(b).take();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].text, compressed.text);
  EXPECT_EQ(render_text({std::make_shared<Snapshot>(Snapshot{{families[0]}})}, {}),
            "# HELP x_info info\n# TYPE x_info gauge\n"
            "x_info{name=\"leaf-1\"} 1\nx_info{name=\"leaf-2\"} 1\n");

  MetricsBuilder samples;
  samples.info("x_info", "info", {{"name", "leaf-3"}});
  EXPECT_THROW(samples.add_family(compressed), std::logic_error);  // beside samples
  MetricFamilies into = std::move(samples).take();
  EXPECT_THROW(merge_families(into, {compressed}), std::logic_error);
}

TEST(Exporter, AcceptEncoding) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("GZip"));
  EXPECT_TRUE(accepts_gzip("x-gzip"));
  EXPECT_TRUE(accepts_gzip("deflate, gzip;q=0.5"));
  EXPECT_TRUE(accepts_gzip("gzip ; q=1.0 ,identity"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("gzip;q=0.001"));
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("identity"));
  EXPECT_FALSE(accepts_gzip("deflate, br"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, *"));  // named gzip wins over *
  EXPECT_FALSE(accepts_gzip("*;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=abc"));
  EXPECT_FALSE(accepts_gzip("gzipx"));
}

TEST(Exporter, CollectNamesCollectorsAndSelf) {
  ExporterFixture f;
  auto only = f.scrape("collect[]=sysfs", "");
  ASSERT_EQ(only.status, 200u);
  EXPECT_NE(only.body.find("ibfabric_sysfs_x_total{port=\"1\"} 5\n"), std::string::npos);
  EXPECT_NE(only.body.find("ibfabric_collector_success{collector=\"sysfs\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(only.body.find("collector=\"fabric\""), std::string::npos) << only.body;
  EXPECT_EQ(only.body.find("ibfabric_fabric_"), std::string::npos);
  EXPECT_EQ(only.body.find("ibfabric_http_requests_total"), std::string::npos);
  EXPECT_EQ(only.body.find("# TYPE ibfabric_collector_success gauge"),
            only.body.rfind("# TYPE ibfabric_collector_success gauge"));

  // URL-encoded as Prometheus sends it, several names, and self; gzip the same.
  auto two = f.scrape("collect%5B%5D=fabric&collect%5B%5D=self&other=1", "gzip");
  ASSERT_EQ(two.status, 200u);
  std::string text = gunzip(two.body);
  EXPECT_EQ(text.find("sysfs"), std::string::npos);
  EXPECT_NE(text.find("ibfabric_collector_success{collector=\"fabric\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ibfabric_fabric_port_receive_bytes_total{"), std::string::npos);
  EXPECT_NE(text.find("ibfabric_http_requests_total "), std::string::npos);

  auto rest = f.scrape("exclude[]=fabric", "");
  ASSERT_EQ(rest.status, 200u);
  EXPECT_EQ(rest.body.find("collector=\"fabric\""), std::string::npos);
  EXPECT_EQ(rest.body.find("ibfabric_fabric_"), std::string::npos);
  EXPECT_NE(rest.body.find("ibfabric_sysfs_x_total"), std::string::npos);
  EXPECT_NE(rest.body.find("ibfabric_http_requests_total "), std::string::npos);

  // A filtered scrape and a full one share the fabric snapshot's cached deflate.
  f.scrape("", "gzip");
  std::size_t cached = f.exporter.cached_bytes();
  f.scrape("collect[]=fabric", "gzip");
  f.scrape("", "gzip");
  EXPECT_EQ(f.exporter.cached_bytes(), cached);
}

TEST(Exporter, BadCollectIsA400WithTheReason) {
  ExporterFixture f;
  auto unknown = f.scrape("collect[]=fabrik", "gzip");
  EXPECT_EQ(unknown.status, 400u);
  EXPECT_FALSE(unknown.gzip);
  EXPECT_NE(unknown.body.find("unknown collector \"fabrik\" in collect[]"), std::string::npos)
      << unknown.body;
  EXPECT_NE(unknown.body.find("enabled: sysfs, fabric"), std::string::npos) << unknown.body;
  EXPECT_EQ(f.scrape("exclude[]=nope", "").status, 400u);
  auto both = f.scrape("collect[]=sysfs&exclude[]=fabric", "");
  EXPECT_EQ(both.status, 400u);
  EXPECT_NE(both.body.find("cannot be used together"), std::string::npos);
  EXPECT_EQ(f.scrape("collect[]=", "").status, 400u);
  EXPECT_EQ(f.scrape("collect%5=sysfs", "").status, 400u);
}

}  // namespace
}  // namespace ibfabric
