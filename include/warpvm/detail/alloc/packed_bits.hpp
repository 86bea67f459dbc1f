#pragma once
/// @file
/// Bit arrays packed 64 to a word (bit i is bit i % 64 of word i / 64): the node arrays of the
/// allocator trees, which keep each tree level in one run of bits so that a level can be
/// scanned or filled a word at a time.

#include "warpvm/detail/host_device.hpp"

#include <cuda/std/bit>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

WARPVM_HD_INLINE constexpr std::size_t words_for_bits(std::uint64_t bits) {
  return static_cast<std::size_t>((bits + 63) / 64);
}

WARPVM_HD_INLINE bool test_bit(const std::uint64_t* words, std::uint64_t i) {
  return (words[i / 64] >> (i % 64)) & 1u;
}

WARPVM_HD_INLINE void assign_bit(std::uint64_t* words, std::uint64_t i, bool on) {
  const std::uint64_t mask = std::uint64_t{1} << (i % 64);
  words[i / 64] = on ? (words[i / 64] | mask) : (words[i / 64] & ~mask);
}

/// Sets (or clears) bits [begin, end).
WARPVM_HD_INLINE void assign_bits(std::uint64_t* words, std::uint64_t begin, std::uint64_t end, bool on) {
  while (begin < end) {
    const std::uint64_t shift = begin % 64;
    const std::uint64_t n = (end - begin < 64 - shift) ? end - begin : 64 - shift;
    const std::uint64_t mask = (n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1) << shift;
    words[begin / 64] = on ? (words[begin / 64] | mask) : (words[begin / 64] & ~mask);
    begin += n;
  }
}

/// The first set bit in [begin, end), or `end` when there is none.
WARPVM_HD_INLINE std::uint64_t find_set_bit(const std::uint64_t* words, std::uint64_t begin, std::uint64_t end) {
  for (std::uint64_t i = begin; i < end; i = (i / 64 + 1) * 64) {
    const std::uint64_t rest = words[i / 64] >> (i % 64);
    if (rest != 0) {
      const std::uint64_t at = i + static_cast<std::uint64_t>(cuda::std::countr_zero(rest));
      return at < end ? at : end;
    }
  }
  return end;
}

}  // namespace warpvm::detail
