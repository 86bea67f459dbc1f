#pragma once
/// @file
/// Uniform neighbour sampling without replacement (GraphSAGE style), as pure __host__ __device__
/// code: the GPU's sample_neighbors kernel runs it per seed node, and host tests check it.
/// Robert Floyd's algorithm picks `fanout` distinct positions out of a node's `degree` with
/// fanout random draws; each draw comes from a counter-based generator keyed by (seed, node,
/// draw), so a sample depends on nothing but its inputs: the same on every run, in any order.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

/// SplitMix64's finaliser: a bijection of 64-bit words whose outputs pass as random.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The random word of draw `draw` for node `node` under `seed`.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t sample_random(std::uint64_t seed, std::uint64_t node,
                                                                     std::uint64_t draw) {
  return mix64(mix64(seed ^ mix64(node)) + draw);
}

/// A random word mapped onto [0, bound) by a 64 x 64 -> 128-bit multiply (bias below 2^-64 x bound).
[[nodiscard]] WARPVM_HD_INLINE std::uint64_t below(std::uint64_t random, std::uint64_t bound) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(random, bound);
#else
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(random) * bound) >> 64);
#endif
}

/// How many neighbours a node of `degree` contributes to a sample of `fanout`.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t sample_size(std::uint64_t degree, std::uint32_t fanout) {
  return degree < fanout ? degree : fanout;
}

/// Writes sample_size(degree, fanout) distinct positions in [0, degree) to `positions`: every
/// position when degree <= fanout (in order), else a uniformly random subset of `fanout`
/// (Floyd: for j = degree - fanout .. degree - 1 draw t in [0, j]; take t, or j if t is taken
/// already). The membership test scans what is written so far: fanout^2 / 2 compares, few for
/// the fanouts of neighbour sampling (10-25), and no scratch memory.
template <class Position>
WARPVM_HD_INLINE void sample_positions(std::uint64_t degree, std::uint32_t fanout, std::uint64_t seed,
                                       std::uint64_t node, Position* positions) {
  if (degree <= fanout) {
    for (std::uint64_t k = 0; k < degree; ++k) positions[k] = static_cast<Position>(k);
    return;
  }
  std::uint32_t taken = 0;
  for (std::uint64_t j = degree - fanout; j < degree; ++j, ++taken) {
    const auto t = static_cast<Position>(below(sample_random(seed, node, j), j + 1));
    bool seen = false;
    for (std::uint32_t k = 0; k < taken; ++k) seen |= positions[k] == t;
    positions[taken] = seen ? static_cast<Position>(j) : t;
  }
}

}  // namespace warpvm::detail
