#pragma once
/// @file
/// Access patterns shared by the GPU benchmarks and the CPU simulator, so that both replay
/// exactly the same pages.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::workloads {

/// The k-th page of a random-order walk over `pages` pages: distinct for k < pages (a prime
/// multiplier is invertible modulo any page count it does not divide).
WARPVM_HD_INLINE std::uint64_t touched_page(std::uint64_t k, std::uint64_t pages) {
  return (k % pages) * 2654435761ull % pages;
}

/// The k-th index of a sparse random read pattern over n elements.
WARPVM_HD_INLINE std::uint64_t sparse_index(std::uint64_t k, std::uint64_t n) {
  std::uint64_t x = k * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (x ^ (x >> 32)) % n;
}

}  // namespace warpvm::workloads
