#include "exporters/prometheus/render.h"

#include "core/text_format.h"

#include <malloc.h>
#include <zlib.h>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace ibfabric {

namespace {

// The exposition is written straight from the snapshots (text_format.h): families of one name
// from several snapshots are grouped under one HELP/TYPE without copying them.

constexpr std::size_t kSlice = 64 * 1024;  // text rendered (and compressed) per step

// Reads a DeflatedText back, after its HELP/TYPE lines, a bounded step at a time.
class Inflater {
 public:
  explicit Inflater(const DeflatedText& text) : text_(text), skip_(text.header) {
    if (inflateInit2(&z_, -15) != Z_OK) throw std::runtime_error("inflateInit2 failed");
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.deflated.data()));
    z_.avail_in = static_cast<uInt>(text.deflated.size());
  }
  ~Inflater() { inflateEnd(&z_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Appends the text until `out` holds `limit` bytes or the text ends; true when it ended.
  bool read(std::string& out, std::size_t limit) {
    unsigned char buffer[16384];
    while (produced_ < text_.length) {
      std::uint64_t want = sizeof buffer;
      if (skip_ > 0) {
        want = std::min(want, skip_);
      } else if (out.size() >= limit) {
        return false;
      } else {
        want = std::min<std::uint64_t>(want, limit - out.size());
      }
      z_.next_out = buffer;
      z_.avail_out = static_cast<uInt>(want);
      int rc = inflate(&z_, Z_SYNC_FLUSH);
      auto n = static_cast<std::size_t>(want - z_.avail_out);
      if ((rc != Z_OK && rc != Z_BUF_ERROR) || n == 0) {
        throw std::runtime_error("a kept family's text does not inflate to its length");
      }
      produced_ += n;
      if (skip_ > 0) {
        skip_ -= n;
      } else {
        out.append(reinterpret_cast<const char*>(buffer), n);
      }
    }
    return true;
  }

 private:
  const DeflatedText& text_;
  z_stream z_{};
  std::uint64_t skip_;  // of the header, still to be read past
  std::uint64_t produced_ = 0;
};

// Families of one name from several snapshots, written under one HELP/TYPE (the first's; a
// family of another type is a clash and left out).
using Group = std::vector<const MetricFamily*>;

// What one scrape writes, in order: runs of families only one snapshot has (their gzip is kept
// until that snapshot is replaced) and everything else (families several snapshots share, like
// the runners' health, and the live self-metrics), rendered per scrape.
struct Piece {
  const Snapshot* owner = nullptr;  // null: rendered per scrape
  std::size_t begin = 0, end = 0;   // owner's families [begin, end)
  std::vector<Group> groups;
  // One family of one snapshot, kept as deflated text: its gzip is that text as it is.
  const DeflatedText* text = nullptr;
};

// `all`: every snapshot of the store, so that a snapshot's runs are the same in a filtered and
// an unfiltered scrape; `selected`: those this scrape writes, in order.
std::vector<Piece> plan(const std::vector<const Snapshot*>& all,
                        const std::vector<const Snapshot*>& selected, const MetricFamilies* live,
                        const std::vector<std::string>& live_names) {
  std::unordered_map<std::string_view, int> sources;
  for (const auto* s : all) {
    for (const auto& f : s->families) ++sources[f.name];
  }
  for (const auto& name : live_names) ++sources[name];

  struct Slot {
    const Snapshot* owner;  // set when the name is in this snapshot only
    std::size_t index;      // of the family in its owner
    Group families;
  };
  std::vector<Slot> slots;
  std::unordered_map<std::string_view, std::size_t> by_name;
  auto add = [&](const MetricFamilies& families, const Snapshot* owner) {
    for (std::size_t i = 0; i < families.size(); ++i) {
      auto [it, inserted] = by_name.emplace(families[i].name, slots.size());
      if (inserted) slots.push_back(Slot{sources[families[i].name] == 1 ? owner : nullptr, i, {}});
      slots[it->second].families.push_back(&families[i]);
    }
  };
  for (const auto* s : selected) add(s->families, s);
  if (live) add(*live, nullptr);

  std::vector<Piece> pieces;
  for (auto& slot : slots) {
    Piece* last = pieces.empty() ? nullptr : &pieces.back();
    const DeflatedText* text = slot.owner ? slot.families.front()->text.get() : nullptr;
    if (text || !(last && !last->text && last->owner == slot.owner &&
                  (!slot.owner || last->end == slot.index))) {
      pieces.push_back(Piece{slot.owner, slot.index, slot.index, {}, text});
      last = &pieces.back();
    }
    last->end = slot.index + 1;
    last->groups.push_back(std::move(slot.families));
  }
  return pieces;
}

// Where the rendering of a piece stands, so that it can stop after any sample and go on.
struct Cursor {
  std::size_t group = 0, member = 0, sample = 0;
  bool header_done = false;
  std::unique_ptr<Inflater> inflater;  // of the member, when it is kept deflated
};

// Appends the piece's text from `at` until `out` holds `limit` bytes or the piece ends; true
// when it ended.
bool render_some(const Piece& piece, Cursor& at, std::string& out, std::size_t limit) {
  while (at.group < piece.groups.size()) {
    const Group& group = piece.groups[at.group];
    const MetricFamily& first = *group.front();
    if (!at.header_done) {
      append_header(out, first);
      at.header_done = true;
    }
    for (; at.member < group.size(); ++at.member, at.sample = 0) {
      const MetricFamily& family = *group[at.member];
      if (family.type != first.type) continue;
      if (family.text) {
        if (!at.inflater) at.inflater = std::make_unique<Inflater>(*family.text);
        if (!at.inflater->read(out, limit)) return false;
        at.inflater.reset();
        continue;
      }
      std::size_t n = family.samples.size();
      if (first.type == prometheus::MetricType::Histogram)
        n = std::min(n, family.histograms.size());
      while (at.sample < n) {
        append_sample_lines(out, first, family, at.sample++);
        if (out.size() >= limit) return false;
      }
    }
    at = Cursor{at.group + 1, 0, 0, false, nullptr};
  }
  return true;
}

MetricFamilies live_families(const std::vector<LiveMetrics>& live) {
  MetricsBuilder self;
  for (const auto& fill : live) fill(self);
  return std::move(self).take();
}

std::vector<std::string> names_of(const MetricFamilies& families) {
  std::vector<std::string> names;
  for (const auto& f : families) names.push_back(f.name);
  return names;
}

// Above this many bytes of replaced snapshots' gzip, hand freed heap back to the kernel: glibc
// keeps it otherwise, and the peak of a sweep would stay resident.
constexpr std::size_t kTrimAfter = 256 << 10;

// Snapshots with at least this many samples are compressed before they are shown (about 1 MB
// of text); smaller ones cost a scrape less than a millisecond.
constexpr std::size_t kPrepareSamples = 10000;
// Or with at least this much text that a collector compressed itself (the fabric sweep's large
// families at scale): the swap of such a snapshot is where the heap goes back to the kernel.
constexpr std::uint64_t kPrepareTextOctets = 1 << 20;
// Families of a prepared snapshot with at least this many samples are kept as compressed text
// only (inflated for a plain-text scrape); smaller ones keep their samples.
constexpr std::size_t kDeflateFamilySamples = 256;

}  // namespace

std::string render_text(const std::vector<SnapshotPtr>& snapshots,
                        const std::vector<LiveMetrics>& live) {
  const MetricFamilies self = live_families(live);
  std::vector<const Snapshot*> all;
  for (const auto& s : snapshots) {
    if (s) all.push_back(s.get());
  }
  std::string out;
  for (const auto& piece : plan(all, all, &self, names_of(self))) {
    Cursor at;
    render_some(piece, at, out, std::numeric_limits<std::size_t>::max());
  }
  return out;
}

struct Exporter::Segment {
  std::weak_ptr<const Snapshot> snapshot;
  const Snapshot* key = nullptr;
  std::size_t begin = 0, end = 0;
  DeflatedText text;  // without a header to skip: a run's gzip is only ever copied
};

// Shared by the loop's scrapes and the worker's prepare(); entries are immutable once in.
struct Exporter::Cache {
  mutable std::mutex mutex;
  std::vector<std::shared_ptr<const Segment>> segments;

  std::shared_ptr<const Segment> find(const Piece& piece) const {
    std::lock_guard lock(mutex);
    for (const auto& s : segments) {
      if (s->key == piece.owner && s->begin == piece.begin && s->end == piece.end &&
          !s->snapshot.expired()) {
        return s;
      }
    }
    return nullptr;
  }
  void insert(std::shared_ptr<const Segment> segment) {
    std::lock_guard lock(mutex);
    segments.push_back(std::move(segment));
  }
  // Forgets the gzip of snapshots nothing holds any more (replaced, and no scrape streams
  // them); true when a large snapshot went, so that freed heap should go back to the kernel.
  bool prune() {
    std::size_t released = 0;
    std::lock_guard lock(mutex);
    std::erase_if(segments, [&](const auto& s) {
      bool gone = s->snapshot.expired();
      if (gone) released += s->text.deflated.size();
      return gone;
    });
    return released >= kTrimAfter;
  }
};

namespace {

// Compresses the rest of `piece` from `at` after what `text` holds already, a slice at a time.
void compress(const Piece& piece, Cursor& at, Deflater& deflater, std::string& text,
              DeflatedText& into) {
  deflater.begin(&into.deflated);
  for (bool ended = false; !ended;) {
    ended = render_some(piece, at, text, kSlice);
    deflater.write(text);
    text.clear();
  }
  deflater.end();
  into.crc = static_cast<std::uint32_t>(deflater.crc());
  into.length = deflater.length();
  into.deflated.shrink_to_fit();
}

// One piece's gzip, to be kept while its snapshot is held.
std::shared_ptr<Exporter::Segment> start_segment(const Piece& piece, const SnapshotPtr& owner) {
  auto s = std::make_shared<Exporter::Segment>();
  s->snapshot = owner;
  s->key = piece.owner;
  s->begin = piece.begin;
  s->end = piece.end;
  return s;
}

const char kGzipHeader[] = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";

// A scrape's body. Holds the snapshots it was planned on; each next() renders one slice of
// text (or copies a slice of a kept gzip), so a scrape costs the loop a bounded step at a time.
class ScrapeStream : public ScrapeBody {
 public:
  // `all`: every snapshot of the store (only read here); `held`: the selected ones.
  ScrapeStream(const std::vector<const Snapshot*>& all, std::vector<SnapshotPtr> held,
               MetricFamilies live, bool with_live, bool gzip,
               std::shared_ptr<Exporter::Cache> cache)
      : held_(std::move(held)), live_(std::move(live)), gzip_(gzip), cache_(std::move(cache)) {
    std::vector<const Snapshot*> selected;
    for (const auto& s : held_) selected.push_back(s.get());
    pieces_ = plan(all, selected, with_live ? &live_ : nullptr, names_of(live_));
    if (gzip_) crc_ = crc32(0, nullptr, 0);
  }
  // The pieces point into held_ and live_: built in place, never moved.
  ScrapeStream(const ScrapeStream&) = delete;
  ScrapeStream& operator=(const ScrapeStream&) = delete;

  bool next(std::string& out) override {
    if (done_) return false;
    const std::size_t start = out.size();
    if (gzip_ && !started_) out.append(kGzipHeader, sizeof kGzipHeader - 1);
    started_ = true;
    work_ = 0;
    // A slice of body, or of text compressed, whichever comes first: one step stays short.
    while (out.size() - start < kSlice && work_ < kSlice) {
      if (piece_ == pieces_.size()) {
        if (gzip_) {
          // The final empty block that closes the deflate stream (what zlib's Z_FINISH writes
          // after a sync flush), so that no compressor is made for it.
          out.append("\x03\x00", 2);
          for (int i = 0; i < 4; ++i) out += static_cast<char>((crc_ >> (8 * i)) & 0xff);
          for (int i = 0; i < 4; ++i) out += static_cast<char>((length_ >> (8 * i)) & 0xff);
        }
        done_ = true;
        break;
      }
      if (gzip_) {
        step_gzip(out, start);
      } else if (render_some(pieces_[piece_], cursor_, out, start + kSlice)) {
        next_piece();
      }
    }
    return out.size() > start || !done_;
  }

 private:
  void next_piece() {
    ++piece_;
    cursor_ = Cursor{};
    kept_ = nullptr;
    kept_holder_.reset();
    building_.reset();
    deflater_.reset();  // 268 KiB of zlib state, held only while a piece is compressed
    emitted_ = 0;
  }

  void step_gzip(std::string& out, std::size_t start) {
    const Piece& piece = pieces_[piece_];
    if (!kept_ && !building_) {
      if (piece.text) {
        kept_ = piece.text;  // the family's kept text; held_ keeps it alive
      } else if (piece.owner) {
        if (auto segment = cache_->find(piece)) {
          kept_holder_ = segment;
          kept_ = &segment->text;
        }
      }
    }
    if (kept_) {
      std::size_t n = std::min(kept_->deflated.size() - emitted_, start + kSlice - out.size());
      out.append(kept_->deflated, emitted_, n);
      emitted_ += n;
      if (emitted_ == kept_->deflated.size()) {
        crc_ = crc32_combine(crc_, kept_->crc, static_cast<z_off_t>(kept_->length));
        length_ += kept_->length;
        next_piece();
      }
      return;
    }
    if (!deflater_) {
      // Not kept (a small snapshot, or a scrape before prepare() ended): compressed here, and
      // kept for the next scrapes when it belongs to one snapshot.
      building_ = piece.owner ? start_segment(piece, owner_of(piece)) : nullptr;
      scratch_.clear();
      deflater_.emplace();
      deflater_->begin(building_ ? &building_->text.deflated : &scratch_);
      emitted_ = 0;
    }
    text_.clear();
    bool ended = render_some(piece, cursor_, text_, kSlice);
    work_ += text_.size();
    deflater_->write(text_);
    if (ended) deflater_->end();
    std::string& produced = building_ ? building_->text.deflated : scratch_;
    out.append(produced, emitted_, std::string::npos);
    emitted_ = produced.size();
    if (!building_) {
      scratch_.clear();
      emitted_ = 0;
    }
    if (ended) {
      crc_ = crc32_combine(crc_, deflater_->crc(), static_cast<z_off_t>(deflater_->length()));
      length_ += deflater_->length();
      if (building_) {
        building_->text.crc = static_cast<std::uint32_t>(deflater_->crc());
        building_->text.length = deflater_->length();
        building_->text.deflated.shrink_to_fit();
        cache_->insert(std::move(building_));
      }
      next_piece();
    }
  }

  const SnapshotPtr& owner_of(const Piece& piece) const {
    for (const auto& s : held_) {
      if (s.get() == piece.owner) return s;
    }
    throw std::logic_error("a piece's snapshot is not held");
  }

  std::vector<SnapshotPtr> held_;
  MetricFamilies live_;
  std::vector<Piece> pieces_;
  bool gzip_;
  std::shared_ptr<Exporter::Cache> cache_;
  std::optional<Deflater> deflater_;
  bool started_ = false, done_ = false;
  std::size_t piece_ = 0;
  Cursor cursor_;
  const DeflatedText* kept_ = nullptr;                    // the gzip of the current piece, kept
  std::shared_ptr<const Exporter::Segment> kept_holder_;  // what holds it, when a segment
  std::shared_ptr<Exporter::Segment> building_;           // or being compressed for keeping
  std::size_t emitted_ = 0;                               // bytes of it already in the body
  std::size_t work_ = 0;                                  // text compressed in this step
  std::string text_, scratch_;
  uLong crc_ = 0;
  std::uint64_t length_ = 0;
};

}  // namespace

std::string read_body(ScrapeResponse& response) {
  if (!response.stream) return response.body;
  std::string out;
  while (response.stream->next(out)) {
  }
  return out;
}

Exporter::Exporter() : cache_(std::make_shared<Cache>()) {}

Exporter::~Exporter() {
  worker_.stop();
  worker_.join();
}

std::size_t Exporter::cached_bytes() const {
  std::lock_guard lock(cache_->mutex);
  std::size_t n = 0;
  for (const auto& s : cache_->segments) n += s->text.deflated.capacity();
  return n;
}

void Exporter::release_replaced() {
  // The replaced snapshot's text and the shown one's samples are freed by now; glibc would keep
  // the heap (the peak of a sweep staying resident). malloc_trim walks the whole heap and holds
  // each arena's lock meanwhile (tens of ms at 50,000 ports): on the worker, right after a
  // swap, rather than in the next scrape.
  boost::asio::post(worker_, [cache = cache_] {
    cache->prune();
    malloc_trim(0);
  });
}

bool Exporter::worth_preparing(const Snapshot& snapshot) {
  std::size_t samples = 0;
  std::uint64_t text = 0;
  for (const auto& f : snapshot.families) {
    samples += f.samples.size();
    if (f.text) text += f.text->length;
  }
  return samples >= kPrepareSamples || text >= kPrepareTextOctets;
}

void Exporter::prepare(const NamedSnapshots& current, const std::string& name,
                       std::shared_ptr<Snapshot> snapshot, std::vector<std::string> live_names,
                       std::function<void(SnapshotPtr)> done) {
  std::vector<SnapshotPtr> others;
  for (const auto& [n, s] : current) {
    if (s && n != name) others.push_back(s);
  }
  boost::asio::post(
      worker_, [cache = cache_, others = std::move(others), snapshot = std::move(snapshot),
                live_names = std::move(live_names), done = std::move(done)]() mutable {
        if (cache->prune()) malloc_trim(0);
        Deflater deflater;
        std::string text;
        // Large families are kept only as their compressed text: the shown snapshot no longer
        // holds samples beside the one being built (docs/design.md, "The exposition").
        auto kept = std::make_shared<Snapshot>();
        kept->families.reserve(snapshot->families.size());
        for (auto& family : snapshot->families) {
          if (family.samples.size() < kDeflateFamilySamples) {
            kept->families.push_back(family);
            continue;
          }
          auto& to = kept->families.emplace_back();
          to.name = family.name;
          to.help = family.help;
          to.type = family.type;
          to.text = deflate_family(family, deflater, text);
          // Its samples go now: a large sweep's are mapped blocks (daemon/main.cpp), so the
          // compressed text is not added to all of them at the sweep's peak.
          release_samples(family);
        }
        snapshot.reset();  // the rest (small families, label arenas) goes before it is shown
        // The runs of smaller families that are this snapshot's alone, as a scrape plans them.
        std::vector<const Snapshot*> everything;
        for (const auto& s : others) everything.push_back(s.get());
        everything.push_back(kept.get());
        for (const auto& piece : plan(everything, {kept.get()}, nullptr, live_names)) {
          if (!piece.owner || piece.text || cache->find(piece)) continue;
          auto segment = start_segment(piece, kept);
          Cursor at;
          text.clear();
          compress(piece, at, deflater, text, segment->text);
          cache->insert(std::move(segment));
        }
        others.clear();
        done(std::move(kept));
      });
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

  cache_->prune();  // the heap goes back to the kernel in release_replaced(), off the loop
  std::vector<SnapshotPtr> held;
  std::vector<const Snapshot*> all, selected;
  for (const auto& [name, snapshot] : snapshots) {
    if (!snapshot) continue;
    all.push_back(snapshot.get());
    if (wanted(name)) {
      selected.push_back(snapshot.get());
      held.push_back(snapshot);
    }
  }
  response.gzip = accepts_gzip(request.accept_encoding);
  response.stream = std::make_unique<ScrapeStream>(all, std::move(held), live_families(live),
                                                   wanted("self"), response.gzip, cache_);
  return response;
}

}  // namespace ibfabric
