#pragma once
/// @file
/// Access patterns shared by the GPU benchmarks and the CPU simulator, so that both replay
/// exactly the same pages; and the benchmarks' pseudo-random input words.

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

/// Fresh pseudo-random uint32 values (never zero) from `seed`: xorshift64, its state seeded at
/// the start of each piece of `parallel_for`'s split of [0, n) (parallel_for(n, body) runs
/// body(first, end) over the pieces), so the values depend on the split.
template <class ParallelFor>
void fill_random(std::uint32_t* data, std::uint64_t n, std::uint64_t seed, ParallelFor&& parallel_for) {
  parallel_for(n, [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + begin;
    for (std::uint64_t i = begin; i < end; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      data[i] = static_cast<std::uint32_t>(x >> 16) | 1u;
    }
  });
}

}  // namespace warpvm::workloads
