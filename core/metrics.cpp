#include "core/metrics.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <unordered_set>

namespace ibfabric {

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

Labels LabelSet::labels() const {
  Labels out;
  std::size_t i = 0;
  const std::string& t = text_;
  while (i < t.size()) {
    auto eq = t.find('=', i);
    if (eq == std::string::npos || eq + 1 >= t.size()) break;
    std::string name = t.substr(i, eq - i);
    std::string value;
    std::size_t j = eq + 2;  // past `="`
    for (; j < t.size() && t[j] != '"'; ++j) {
      if (t[j] == '\\' && j + 1 < t.size()) {
        ++j;
        value += t[j] == 'n' ? '\n' : t[j];
      } else {
        value += t[j];
      }
    }
    out.emplace_back(std::move(name), std::move(value));
    i = j + 2;  // past `",`
  }
  return out;
}

std::optional<std::string> LabelSet::get(std::string_view name) const {
  for (auto& [k, v] : labels()) {
    if (k == name) return v;
  }
  return std::nullopt;
}

MetricsBuilder::MetricsBuilder() : arena_(std::make_shared<LabelArena>()) {}

MetricsBuilder::FamilyId MetricsBuilder::family(std::string_view name, std::string_view help,
                                                prometheus::MetricType type) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    it = index_.emplace(std::string(name), families_.size()).first;
    auto& fam = families_.emplace_back();
    fam.name = std::string(name);
    fam.help = std::string(help);
    fam.type = type;
    if (hints_) {
      if (auto hint = hints_->find(fam.name); hint != hints_->end()) {
        fam.samples.reserve(hint->second);
      }
    }
  }
  auto& fam = families_[it->second];
  if (fam.type != type) {
    throw std::logic_error("metric " + std::string(name) + " added with two different types");
  }
  return it->second;
}

MetricsBuilder::FamilyId MetricsBuilder::numbered_family(std::string_view name,
                                                         std::string_view help,
                                                         prometheus::MetricType type,
                                                         std::string_view number_label) {
  if (type == prometheus::MetricType::Histogram || number_label.empty()) {
    throw std::logic_error("metric " + std::string(name) +
                           ": a numbered family is a counter or gauge, with a label name");
  }
  auto id = family(name, help, type);
  auto& fam = families_[id];
  if (fam.number_label.empty() && fam.samples.empty()) {
    fam.number_label = std::string(number_label);
    fam.numbers.reserve(fam.samples.capacity());
  } else if (fam.number_label != number_label) {
    throw std::logic_error("metric " + std::string(name) + " numbered by two labels");
  }
  return id;
}

void MetricsBuilder::misnumbered(const MetricFamily& family) {
  if (family.number_label.empty()) {
    throw std::logic_error("metric " + family.name +
                           " is not numbered (numbered_family()); its samples take no number");
  }
  throw std::logic_error("metric " + family.name + " is numbered by " + family.number_label +
                         "; its samples need a number");
}

namespace {
void append_label_text(std::string& out, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k;
    out += "=\"";
    append_escaped(out, v, true);
    out += '"';
  }
}

void add_arena(MetricFamily& fam, std::shared_ptr<const LabelArena> arena) {
  if (std::find(fam.arenas.begin(), fam.arenas.end(), arena) == fam.arenas.end()) {
    fam.arenas.push_back(std::move(arena));
  }
}
}  // namespace

std::string label_text(const Labels& labels) {
  std::string text;
  append_label_text(text, labels);
  return text;
}

const LabelSet* MetricsBuilder::labels(const Labels& labels) {
  scratch_.clear();
  append_label_text(scratch_, labels);
  if (auto it = interned_.find(scratch_); it != interned_.end()) return it->second;
  const LabelSet& set = arena_->sets.emplace_back(scratch_);
  interned_.emplace(set.text(), &set);
  return &set;
}

void MetricsBuilder::gauge(std::string_view name, std::string_view help, const Labels& labels,
                           double value) {
  add(family(name, help, prometheus::MetricType::Gauge), this->labels(labels), value);
}

void MetricsBuilder::counter(std::string_view name, std::string_view help, const Labels& labels,
                             double value) {
  add(family(name, help, prometheus::MetricType::Counter), this->labels(labels), value);
}

void MetricsBuilder::info(std::string_view name, std::string_view help, const Labels& labels) {
  gauge(name, help, labels, 1);
}

void MetricsBuilder::histogram(std::string_view name, std::string_view help, const Labels& labels,
                               const std::vector<double>& bounds,
                               const std::vector<std::uint64_t>& bucket_counts, std::uint64_t count,
                               double sum) {
  if (bounds.size() != bucket_counts.size()) {
    throw std::logic_error("histogram " + std::string(name) + ": bounds and counts differ");
  }
  auto id = family(name, help, prometheus::MetricType::Histogram);
  add(id, this->labels(labels), 0);
  families_[id].histograms.push_back(HistogramValue{bounds, bucket_counts, count, sum});
}

void MetricsBuilder::declare(std::string_view name, std::string_view help,
                             prometheus::MetricType type) {
  family(name, help, type);
}

namespace {
// A family kept as its compressed text is whole: nothing can be added to it, and it cannot be
// added to a family that has samples.
// Nor can families whose samples are numbered by different labels (or only one's are).
void check_mergeable(const MetricFamily& into, const MetricFamily& from) {
  bool into_used = into.text || !into.samples.empty();
  bool from_used = from.text || !from.samples.empty();
  if ((into.text || from.text) && into_used && from_used) {
    throw std::logic_error("metric " + from.name + " is kept compressed and cannot be merged");
  }
  if (!into.samples.empty() && !from.samples.empty() && into.number_label != from.number_label) {
    throw std::logic_error("metric " + from.name + " numbered by two labels");
  }
}

void append_samples(MetricFamily& into, const MetricFamily& from) {
  if (into.samples.empty() && !from.samples.empty()) into.number_label = from.number_label;
  into.samples.insert(into.samples.end(), from.samples.begin(), from.samples.end());
  into.numbers.insert(into.numbers.end(), from.numbers.begin(), from.numbers.end());
}
}  // namespace

void MetricsBuilder::add_family(const MetricFamily& from) {
  auto& fam = families_[family(from.name, from.help, from.type)];
  check_mergeable(fam, from);
  if (from.text) fam.text = from.text;
  append_samples(fam, from);
  fam.histograms.insert(fam.histograms.end(), from.histograms.begin(), from.histograms.end());
  for (const auto& arena : from.arenas) add_arena(fam, arena);
}

MetricFamilies MetricsBuilder::take() && {
  // Adopted arenas go only to families with a sample outside this builder's own sets: a small
  // family of a shown snapshot would otherwise keep a collector's replaced cache alive.
  std::unordered_set<const LabelSet*> own;
  if (!adopted_.empty()) {
    for (const auto& entry : interned_) own.insert(entry.second);
  }
  for (auto& fam : families_) {
    fam.samples.shrink_to_fit();
    fam.numbers.shrink_to_fit();
    if (fam.samples.empty()) continue;
    add_arena(fam, arena_);
    bool foreign = std::any_of(fam.samples.begin(), fam.samples.end(),
                               [&](const Sample& s) { return !own.contains(s.labels); });
    if (!foreign) continue;
    for (const auto& arena : adopted_) add_arena(fam, arena);
  }
  interned_.clear();
  adopted_.clear();
  return std::move(families_);
}

std::size_t MetricsBuilder::samples() const {
  std::size_t n = 0;
  for (const auto& fam : families_) n += fam.samples.size();
  return n;
}

std::vector<std::pair<MetricsBuilder::FamilyId, MetricFamily>> MetricsBuilder::take_samples(
    const std::function<bool(FamilyId, const MetricFamily&)>& which) {
  std::vector<std::pair<FamilyId, MetricFamily>> out;
  for (FamilyId id = 0; id < families_.size(); ++id) {
    auto& fam = families_[id];
    if (fam.samples.empty() || !fam.histograms.empty() || !which(id, fam)) continue;
    auto& part = out.emplace_back(id, MetricFamily{}).second;
    part.name = fam.name;
    part.help = fam.help;
    part.type = fam.type;
    part.samples = std::move(fam.samples);
    fam.samples = {};
    fam.samples.reserve(part.samples.size());
    part.number_label = fam.number_label;
    part.numbers = std::move(fam.numbers);
    fam.numbers = {};
    if (!fam.number_label.empty()) fam.numbers.reserve(part.numbers.size());
    // Every arena its samples may point into: this builder's and the adopted ones.
    add_arena(part, arena_);
    for (const auto& arena : adopted_) add_arena(part, arena);
  }
  return out;
}

void MetricsBuilder::set_text(FamilyId id, std::shared_ptr<const DeflatedText> text) {
  auto& fam = families_.at(id);
  if (!fam.samples.empty() || !fam.histograms.empty()) {
    throw std::logic_error("metric " + fam.name + " has samples; it cannot be set as text");
  }
  fam.text = std::move(text);
}

MetricsBuilder::SizeHints MetricsBuilder::sizes_of(const MetricFamilies& families) {
  SizeHints sizes;
  for (const auto& f : families) sizes[f.name] = f.samples.size();
  return sizes;
}

void merge_families(MetricFamilies& into, MetricFamilies more) {
  // Reserved first: the index holds views of the names in `into`.
  into.reserve(into.size() + more.size());
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < into.size(); ++i) index.emplace(into[i].name, i);
  for (auto& fam : more) {
    auto it = index.find(fam.name);
    if (it == index.end()) {
      into.push_back(std::move(fam));
      index.emplace(into.back().name, into.size() - 1);
      continue;
    }
    auto& dst = into[it->second];
    check_mergeable(dst, fam);
    if (fam.text) dst.text = std::move(fam.text);
    append_samples(dst, fam);
    dst.histograms.insert(dst.histograms.end(), std::make_move_iterator(fam.histograms.begin()),
                          std::make_move_iterator(fam.histograms.end()));
    for (auto& arena : fam.arenas) add_arena(dst, std::move(arena));
  }
}

void release_samples(MetricFamily& family) {
  std::vector<Sample>().swap(family.samples);
  std::vector<std::uint16_t>().swap(family.numbers);
  std::vector<HistogramValue>().swap(family.histograms);
}

std::string hex_guid(std::uint64_t guid) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(guid));
  return text;
}

}  // namespace ibfabric
