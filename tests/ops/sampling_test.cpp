// The neighbour sampler's algorithm (detail/ops/sampling.hpp) on the host: distinct positions in
// range, everything when the degree is at most the fanout, reproducible per (seed, node), and
// uniform: every position is drawn fanout / degree of the time.

#include "warpvm/detail/ops/sampling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace warpvm::detail {
namespace {

std::vector<std::int64_t> sample(std::uint64_t degree, std::uint32_t fanout, std::uint64_t seed, std::uint64_t node) {
  std::vector<std::int64_t> positions(sample_size(degree, fanout), -1);
  sample_positions(degree, fanout, seed, node, positions.data());
  return positions;
}

TEST(Sampling, PositionsAreDistinctAndInRange) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint64_t degree = 1 + rng() % 300;
    const auto fanout = static_cast<std::uint32_t>(1 + rng() % 40);
    const auto positions = sample(degree, fanout, rng(), rng());
    ASSERT_EQ(positions.size(), std::min<std::uint64_t>(degree, fanout));
    const std::set<std::int64_t> distinct(positions.begin(), positions.end());
    ASSERT_EQ(distinct.size(), positions.size()) << "degree " << degree << " fanout " << fanout;
    for (const std::int64_t p : positions) {
      ASSERT_GE(p, 0);
      ASSERT_LT(static_cast<std::uint64_t>(p), degree);
    }
  }
}

TEST(Sampling, SmallDegreesGiveEveryNeighbourInOrder) {
  for (std::uint64_t degree = 0; degree <= 10; ++degree) {
    const auto positions = sample(degree, 10, 99, degree * 31 + 5);
    ASSERT_EQ(positions.size(), degree);
    for (std::uint64_t k = 0; k < degree; ++k) EXPECT_EQ(positions[k], static_cast<std::int64_t>(k));
  }
}

TEST(Sampling, TheSameKeyGivesTheSameSampleAndAnotherSeedAnother) {
  std::mt19937_64 rng(11);
  int differing = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t seed = rng();
    const std::uint64_t node = rng() % 100000;
    EXPECT_EQ(sample(1000, 15, seed, node), sample(1000, 15, seed, node));
    differing += sample(1000, 15, seed, node) != sample(1000, 15, seed + 1, node);
    differing += sample(1000, 15, seed, node) != sample(1000, 15, seed, node + 1);
  }
  EXPECT_EQ(differing, 400);  // a collision of 15 of 1000 is vanishingly unlikely
}

TEST(Sampling, EveryPositionIsEquallyLikely) {
  // degree 50, fanout 10: each position is in a sample with probability 1/5. Over 40000 samples
  // (nodes) the count of each is 8000 +- 80 (one standard deviation); allow 5.
  constexpr std::uint64_t degree = 50;
  constexpr std::uint32_t fanout = 10;
  constexpr int samples = 40000;
  std::vector<int> hits(degree, 0);
  for (int node = 0; node < samples; ++node)
    for (const std::int64_t p : sample(degree, fanout, 1234, static_cast<std::uint64_t>(node))) ++hits[p];
  const double expected = double(samples) * fanout / degree;
  const double sigma = std::sqrt(expected * (1.0 - double(fanout) / degree));
  for (std::uint64_t p = 0; p < degree; ++p)
    EXPECT_NEAR(hits[p], expected, 5 * sigma) << "position " << p;
  // Pairs too (Floyd is uniform over subsets, not only over positions): positions 0 and 49
  // together with probability (10 * 9) / (50 * 49).
  int both = 0;
  for (int node = 0; node < samples; ++node) {
    const auto s = sample(degree, fanout, 1234, static_cast<std::uint64_t>(node));
    both += std::count(s.begin(), s.end(), 0) && std::count(s.begin(), s.end(), 49);
  }
  const double pair = double(samples) * fanout * (fanout - 1) / (degree * (degree - 1));
  EXPECT_NEAR(both, pair, 5 * std::sqrt(pair));
}

TEST(Sampling, BelowMapsOntoTheRange) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 10000; ++trial) {
    const std::uint64_t bound = 1 + rng() % 1000000;
    EXPECT_LT(below(rng(), bound), bound);
  }
  EXPECT_EQ(below(~std::uint64_t{0}, 7), 6u);
  EXPECT_EQ(below(0, 7), 0u);
}

}  // namespace
}  // namespace warpvm::detail
