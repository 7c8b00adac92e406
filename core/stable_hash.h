#pragma once
// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3). Fixed here rather than
// std::hash so that every host and every version computes the same value: fabric shards and
// probe peer subsets are chosen by it on many nodes independently.

#include <cstdint>
#include <string_view>

namespace ibfabric {

inline std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace ibfabric
