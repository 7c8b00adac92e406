// libFuzzer target: every parser of ib/sysfs_parse.h over the same file content.
// Besides crashes and sanitizer reports, it checks what the header promises: a parsed GUID is
// "0x" and 16 lowercase hex digits, and printable() output is printable.

#include "ib/sysfs_parse.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sysfs = ibfabric::sysfs;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto trimmed = sysfs::trim(text);
  if (trimmed.size() > text.size()) __builtin_trap();
  (void)sysfs::parse_numbered_name(text);
  (void)sysfs::parse_rate(text);
  if (auto guid = sysfs::parse_guid(text)) {
    if (guid->size() != 18 || guid->compare(0, 2, "0x") != 0) __builtin_trap();
    for (char c : guid->substr(2)) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) __builtin_trap();
    }
  }
  (void)sysfs::parse_hex(text);
  (void)sysfs::parse_decimal(text);
  (void)sysfs::parse_counter(text);
  for (char c : sysfs::printable(text)) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      __builtin_trap();
    }
  }
  return 0;
}
