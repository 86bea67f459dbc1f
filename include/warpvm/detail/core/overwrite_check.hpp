#pragma once
/// @file
/// Checked mode's test of the overwrite promise. A page loaded for an overwrite span is not read
/// from host memory: its frame still holds its previous page's bytes (perhaps another object's),
/// and whatever the span leaves unwritten goes back to the host over the page's data. Checked
/// mode fills such a frame with a poison byte instead, and the span's release looks for a
/// 16-byte chunk of the page's object bytes that still holds nothing but poison.
///
/// A run of unwritten bytes shorter than a chunk can go unnoticed, and a chunk the kernel wrote
/// with 16 poison bytes (0xA5 each) is reported although it was written: a chance of 2^-128 for
/// random data, none for zeros, small integers or ordinary floats.

#include "warpvm/detail/host_device.hpp"

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

inline constexpr std::uint32_t overwrite_poison_word = 0xA5A5A5A5u;
inline constexpr std::uint32_t overwrite_chunk_bytes = 16;

/// The chunks (16 bytes, the last possibly fewer) of a page holding `bytes` object bytes.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t overwrite_chunks(std::uint64_t bytes) {
  return static_cast<std::uint32_t>((bytes + overwrite_chunk_bytes - 1) / overwrite_chunk_bytes);
}

/// Whether chunk `chunk` of a page whose object bytes are [page, page + bytes) holds only poison:
/// bytes a promised overwrite never wrote. `page` is 16-byte aligned (a frame).
[[nodiscard]] WARPVM_HD_INLINE bool chunk_unwritten(const std::byte* page, std::uint64_t bytes, std::uint32_t chunk) {
  const std::uint64_t begin = std::uint64_t{chunk} * overwrite_chunk_bytes;
  const std::uint64_t end = begin + overwrite_chunk_bytes < bytes ? begin + overwrite_chunk_bytes : bytes;
  const auto* words = reinterpret_cast<const std::uint32_t*>(page);
  // Elements are powers of two of at least 1 byte: a tail may end inside a word, checked bytewise.
  std::uint64_t at = begin;
  for (; at + 4 <= end; at += 4)
    if (words[at / 4] != overwrite_poison_word) return false;
  for (; at < end; ++at)
    if (static_cast<std::uint8_t>(page[at]) != (overwrite_poison_word & 0xffu)) return false;
  return true;
}

}  // namespace warpvm::detail
