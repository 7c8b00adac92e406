#pragma once
// The metric model every collector fills and the exporter renders. A family is declared once
// (name, help, type); a sample is a pointer to an interned label set and a double. Label sets
// are interned per builder, so the 26 series of one switch port share one `node_guid`/`port`
// set: a sample costs 16 bytes however many labels it has. A family may also number its
// samples (a port's VL): the number is a label of the sample's own, so the series of a port's
// VLs share the port's set too. prometheus-cpp supplies only the
// MetricType enum (docs/design.md says why its MetricFamily/ClientMetric model was dropped).

#include <prometheus/metric_type.h>

#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ibfabric {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One label set as the text format writes it between the braces: `name="escaped value",...`,
// in the order it was given. Empty for a sample without labels.
class LabelSet {
 public:
  explicit LabelSet(std::string text) : text_(std::move(text)) {}
  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  // The pairs, unescaped (for tests and filters; rendering uses text()).
  Labels labels() const;
  std::optional<std::string> get(std::string_view name) const;

 private:
  std::string text_;
};

// Owns the label sets a builder interned; families keep it alive for their samples.
struct LabelArena {
  std::deque<LabelSet> sets;
};

struct Sample {
  const LabelSet* labels;  // never null; owned by one of the family's arenas
  double value;            // counter or gauge value; unused for a histogram
};

struct HistogramValue {
  std::vector<double> bounds;                // upper bounds, without +Inf
  std::vector<std::uint64_t> bucket_counts;  // cumulative, one per bound
  std::uint64_t count = 0;                   // the +Inf bucket
  double sum = 0;
};

// A family's text, compressed: what the exporter keeps of a large family of a shown snapshot
// instead of its samples (docs/design.md, "The exposition"), and what a collector holds of a
// large family it shows unchanged in many snapshots (the fabric's node and cable info,
// collectors/fabric/topology_info.h). Raw deflate ended by a sync flush (byte-aligned, not
// final), so that such texts join into one gzip member; the first `header` bytes of the text
// are the family's HELP and TYPE lines.
struct DeflatedText {
  std::string deflated;
  std::uint32_t crc = 0;     // CRC-32 of the text
  std::uint64_t length = 0;  // of the text
  std::uint64_t header = 0;
};

struct MetricFamily {
  std::string name;
  std::string help;
  prometheus::MetricType type = prometheus::MetricType::Untyped;
  std::vector<Sample> samples;
  std::vector<HistogramValue> histograms;  // histogram families: histograms[i] of samples[i]
  // Set: every sample has a label of this name after its set's, `number_label="numbers[i]"`
  // (MetricsBuilder::numbered_family). Never a histogram's.
  std::string number_label;
  std::vector<std::uint16_t> numbers;
  std::vector<std::shared_ptr<const LabelArena>> arenas;
  // Set: the family's lines are this text, and samples and histograms are empty.
  std::shared_ptr<const DeflatedText> text;
};

using MetricFamilies = std::vector<MetricFamily>;

// Frees `family`'s samples and what lies beside them (numbers, histograms) at once, memory
// included: once its text is compressed, what a large family held is given back before the
// next family is compressed.
void release_samples(MetricFamily& family);

// A family a collector declares whatever it reads (MetricsBuilder::declare), listed once with
// its help text.
struct FamilyDoc {
  std::string_view name;
  std::string_view help;
  prometheus::MetricType type;
};

// Builds a list of metric families; samples of one family stay together whatever the order
// they are added in. Adding a sample to an existing name with another type is a programming
// error and throws std::logic_error.
class MetricsBuilder {
 public:
  MetricsBuilder();

  void gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  void counter(std::string_view name, std::string_view help, const Labels& labels, double value);
  // A labels-only metric: value 1. By convention its name ends in `_info`.
  void info(std::string_view name, std::string_view help, const Labels& labels);
  // `bucket_counts[i]` is the cumulative count of observations <= `bounds[i]`; the +Inf bucket
  // is `count`.
  void histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const std::vector<double>& bounds, const std::vector<std::uint64_t>& bucket_counts,
                 std::uint64_t count, double sum);

  // Declares a family without samples, so its HELP/TYPE appear even when nothing is measured.
  void declare(std::string_view name, std::string_view help, prometheus::MetricType type);

  // The declare-once path for collectors that emit thousands of samples: look a family and a
  // label set up once, then add values without hashing names or labels again.
  using FamilyId = std::size_t;
  FamilyId family(std::string_view name, std::string_view help, prometheus::MetricType type);
  const LabelSet* labels(const Labels& labels);
  // A family whose samples each carry a number as a label of their own, `number_label`
  // (MetricFamily::number_label); its samples are added with add_numbered() only.
  FamilyId numbered_family(std::string_view name, std::string_view help,
                           prometheus::MetricType type, std::string_view number_label);
  void add(FamilyId family, const LabelSet* labels, double value) {
    auto& fam = families_[family];
    if (!fam.number_label.empty()) misnumbered(fam);
    fam.samples.push_back(Sample{labels, value});
  }
  void add_numbered(FamilyId family, const LabelSet* labels, std::uint16_t number, double value) {
    auto& fam = families_[family];
    if (fam.number_label.empty()) misnumbered(fam);
    fam.samples.push_back(Sample{labels, value});
    fam.numbers.push_back(number);
  }
  // The per-sample calls with a label set from labels(): no label hashing per sample. Templates
  // so that `{}` (no labels) still means an empty Labels, never a null LabelSet*.
  template <class P>
  requires std::same_as<P, const LabelSet*>
  void gauge(std::string_view name, std::string_view help, P labels, double value) {
    add(family(name, help, prometheus::MetricType::Gauge), labels, value);
  }
  template <class P>
  requires std::same_as<P, const LabelSet*>
  void counter(std::string_view name, std::string_view help, P labels, double value) {
    add(family(name, help, prometheus::MetricType::Counter), labels, value);
  }

  // For label sets kept across collections (a collector's own cache): `arena` holds sets
  // passed to add(); every family of the result keeps it alive.
  void adopt(std::shared_ptr<const LabelArena> arena) { adopted_.push_back(std::move(arena)); }
  // Appends the samples of a family built before (a collector's cached result) to the family
  // of the same name, which keeps the arenas they point into. A family kept compressed (`text`)
  // is added whole, to a family of that name that has nothing yet (std::logic_error if not).
  void add_family(const MetricFamily& family);

  MetricFamilies take() &&;
  bool empty() const { return families_.empty(); }

  // Samples added so far, over every family.
  std::size_t samples() const;
  // Moves out the samples added so far to each family `which` picks (never a histogram's), as
  // a family of its own (name, help, type, samples, and the arenas they may point into), so
  // that a large result can be compressed part by part while it is built (the fabric sweep).
  // The family keeps its place, empty, reserved as large as what was taken, and takes more.
  std::vector<std::pair<FamilyId, MetricFamily>> take_samples(
      const std::function<bool(FamilyId, const MetricFamily&)>& which);
  // Sets the compressed text of a family whose samples were all taken (MetricFamily::text);
  // std::logic_error if it has any.
  void set_text(FamilyId id, std::shared_ptr<const DeflatedText> text);

  // How many samples each family had last time (sizes_of() of the previous result): families
  // are reserved that many, so that a large collection does not grow its vectors by doubling
  // (up to twice the memory while it is built).
  using SizeHints = std::unordered_map<std::string, std::size_t>;
  void size_hints(const SizeHints* hints) { hints_ = hints; }
  static SizeHints sizes_of(const MetricFamilies& families);

 private:
  MetricFamilies families_;
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::size_t, NameHash, std::equal_to<>> index_;
  std::shared_ptr<LabelArena> arena_;
  std::vector<std::shared_ptr<const LabelArena>> adopted_;
  std::unordered_map<std::string_view, const LabelSet*> interned_;  // views into arena_
  std::string scratch_;
  const SizeHints* hints_ = nullptr;

  // A sample without a number for a numbered family, or with one for a family that is not.
  [[noreturn]] static void misnumbered(const MetricFamily& family);
};

// Appends `more` to `into`, merging families of the same name (their samples are concatenated).
void merge_families(MetricFamilies& into, MetricFamilies more);

// The text of a label set as LabelSet holds it.
std::string label_text(const Labels& labels);

// Appends `text` escaped as the text format wants it: backslash and newline always, the double
// quote too inside a label value.
void append_escaped(std::string& out, std::string_view text, bool quote);

// A GUID as label values carry it: "0x" and 16 lower-case hex digits.
std::string hex_guid(std::uint64_t guid);

// An immutable result of one collection; shared read-only between the loop and scrapes. What
// the exporter derives from it (rendered or compressed text) lives in the exporter.
struct Snapshot {
  MetricFamilies families;
};
using SnapshotPtr = std::shared_ptr<const Snapshot>;

}  // namespace ibfabric
