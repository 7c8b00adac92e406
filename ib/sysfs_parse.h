#pragma once
// Parsers for the text the kernel writes into /sys/class/infiniband (drivers/infiniband/core/
// sysfs.c). Each returns nullopt (or CounterText::garbled) for text the kernel would not write,
// so the caller can count the file as garbled instead of exporting a wrong number.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ibfabric::sysfs {

// The value without the trailing newline the kernel appends (and any other surrounding blanks).
std::string_view trim(std::string_view text);

// "4: ACTIVE", "5: LinkUp", "7: Phy Test", "1: CA", "3: <unknown>" (state, phys_state, node_type).
struct NumberedName {
  std::uint32_t number = 0;
  std::string name;
};
std::optional<NumberedName> parse_numbered_name(std::string_view text);

// "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X)", "2.5 Gb/sec (1X SDR)", "56 Gb/sec (4X FDR)".
struct LinkRate {
  std::uint64_t bytes_per_second = 0;
  std::uint32_t lanes = 0;  // 4 for "4X"
  std::string width;        // "4X"
  std::string speed;        // "NDR"; "SDR" when the kernel printed no name
};
std::optional<LinkRate> parse_rate(std::string_view text);

// "0c42:a103:0065:ab12" -> "0x0c42a1030065ab12" (node_guid, sys_image_guid).
std::optional<std::string> parse_guid(std::string_view text);

// "0x1a2" (lid, sm_lid: the kernel prints them as 0x%x). The 0x prefix is required.
std::optional<std::uint64_t> parse_hex(std::string_view text);

// "0", "2" (sm_sl, lid_mask_count): unsigned decimal without sign or prefix.
std::optional<std::uint64_t> parse_decimal(std::string_view text);

// A counter file: an unsigned decimal up to 2^64-1, or the kernel's "N/A (no PMA)" for a port
// whose Performance Management Agent did not answer (not an error: the counter does not exist).
struct CounterText {
  enum class Kind { value, not_supported, garbled };
  Kind kind = Kind::garbled;
  std::uint64_t value = 0;
};
CounterText parse_counter(std::string_view text);

// A short, printable rendering of file content for log lines.
std::string printable(std::string_view text);

}  // namespace ibfabric::sysfs
