#include "exporters/prometheus/render.h"
#include "collectors/metrics.h"

#include <gtest/gtest.h>

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
  ASSERT_EQ(families[0].metric.size(), 2u);
  EXPECT_EQ(families[0].metric[1].gauge.value, 3);
  EXPECT_EQ(families[1].metric[0].counter.value, 2);
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

TEST(Render, ASnapshotsOwnFamiliesAreRenderedOnceAndReused) {
  MetricsBuilder one;
  one.gauge("ibfabric_collector_success", "ok", {{"collector", "one"}}, 1);
  one.counter("x_total", "x", {{"port", "1"}}, 5);
  MetricsBuilder two;
  two.gauge("ibfabric_collector_success", "ok", {{"collector", "two"}}, 0);
  auto first = std::make_shared<Snapshot>();
  first->families = std::move(one).take();
  std::vector<SnapshotPtr> snapshots{first, snapshot(std::move(two))};
  std::string text = render_text(snapshots, {});
  // The family only this snapshot has is cached; the one both have is rendered every time.
  ASSERT_EQ(first->rendered.size(), 2u);
  EXPECT_EQ(first->rendered[0], "");
  EXPECT_EQ(first->rendered[1],
            "# HELP x_total x\n# TYPE x_total counter\nx_total{port=\"1\"} 5\n");
  EXPECT_EQ(render_text(snapshots, {}), text);
  EXPECT_NE(text.find("ibfabric_collector_success{collector=\"two\"} 0\n"), std::string::npos);
}

}  // namespace
}  // namespace ibfabric
