#pragma once
// The text exposition format (version 0.0.4) of one metric family, and its compressed form:
// what a scrape writes (exporters/prometheus/render.cpp) and what a family kept compressed
// holds (DeflatedText). Numbers are written with std::to_chars (shortest form that reads back
// exactly).

#include "core/metrics.h"

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ibfabric {

// The family's HELP and TYPE lines.
void append_header(std::string& out, const MetricFamily& family);
// The line(s) of sample `i` of `family`, under the name and type of `first` (the family whose
// header they are written under; `family` itself when alone).
void append_sample_lines(std::string& out, const MetricFamily& first, const MetricFamily& family,
                         std::size_t i);

// Raw deflate (no zlib or gzip framing) of independent pieces that can be concatenated: each
// piece starts from a fresh state and ends with a sync flush (byte-aligned, not final), the way
// pigz joins the blocks it compresses in parallel. A gzip member is then a header, the pieces
// in order, one final empty block and a trailer whose CRC-32 is combined from the pieces'.
class Deflater {
 public:
  Deflater();
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // Starts a piece, appended to `out`.
  void begin(std::string* out);
  void write(std::string_view data);
  // Ends the piece: byte-aligned, not final, so another piece may follow.
  void end();
  uLong crc() const { return crc_; }
  std::uint64_t length() const { return length_; }

 private:
  void run(std::string_view data, int flush);

  z_stream z_{};
  std::string* out_ = nullptr;
  uLong crc_ = 0;
  std::uint64_t length_ = 0;
};

// The whole text of `family` (header and samples) as one such piece. `text` is scratch space.
// Without `header`, its samples only: a later part of a family compressed part by part.
std::shared_ptr<const DeflatedText> deflate_family(const MetricFamily& family, Deflater& deflater,
                                                   std::string& text, bool header = true);
// Appends `piece` to `into`: the text of both in order (the deflated octets joined, the CRC-32
// combined); `into`'s header stays, or is the piece's when `into` was empty.
void append_deflated(DeflatedText& into, const DeflatedText& piece);

}  // namespace ibfabric
