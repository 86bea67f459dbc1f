// How warpvm::ops walks rows over pages (detail/ops/row_pages.hpp): segments tile a row exactly,
// one page each; copy widths divide both addresses; the lanes' sector probes price a segment at
// the sectors it covers.

#include "warpvm/detail/ops/row_pages.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>

namespace warpvm::detail {
namespace {

TEST(RowPages, SegmentsTileARowOnePageEach) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 5000; ++trial) {
    const unsigned element_shift = 4 + static_cast<unsigned>(rng() % 10);  // 16 .. 8192 elements a page
    const std::uint64_t dim = 1 + rng() % 3000;
    const std::uint64_t row = rng() % 100000;
    const std::uint64_t first = row * dim;
    std::uint64_t covered = first;
    int segments = 0;
    while (covered < first + dim) {
      const RowSegment s = segment_at(covered, first + dim, element_shift);
      ASSERT_EQ(s.first, covered);
      ASSERT_GT(s.count, 0u);
      ASSERT_EQ(s.first >> element_shift, (s.first + s.count - 1) >> element_shift) << "one page per segment";
      covered += s.count;
      ++segments;
    }
    ASSERT_EQ(covered, first + dim);
    // As few as possible: the pages the row touches.
    ASSERT_EQ(static_cast<std::uint64_t>(segments), ((first + dim - 1) >> element_shift) - (first >> element_shift) + 1);
  }
}

TEST(RowPages, CopyWidthIsTheWidestCommonAlignment) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 10000; ++trial) {
    const std::uint64_t a = rng() % 4096;
    const std::uint64_t b = rng() % 4096;
    const unsigned width = copy_width(a, b);
    ASSERT_TRUE(width == 1 || width == 2 || width == 4 || width == 8 || width == 16);
    ASSERT_EQ(a % width, 0u);
    ASSERT_EQ(b % width, 0u);
    ASSERT_TRUE(width == 16 || a % (2 * width) != 0 || b % (2 * width) != 0) << a << " " << b;
  }
  EXPECT_EQ(copy_width(4096, 256), 16u);
  EXPECT_EQ(copy_width(4096, 260), 4u);
}

TEST(RowPages, SectorProbesCountTheSegmentsSectors) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 5000; ++trial) {
    const auto byte_in_page = static_cast<std::uint32_t>(rng() % 65536);
    const auto bytes = static_cast<std::uint32_t>(1 + rng() % 8192);
    const std::uint32_t first = byte_in_page / remote_sector_bytes;
    const std::uint32_t sectors = (byte_in_page + bytes - 1) / remote_sector_bytes - first + 1;
    // What read_absent_page_remotely counts: distinct sectors named, times each probe's sectors.
    std::set<std::uint32_t> named;
    std::uint32_t per_probe = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
      const SectorProbe p = sector_probe(byte_in_page, bytes, lane);
      named.insert(p.byte_in_page / remote_sector_bytes);
      per_probe = p.bytes / remote_sector_bytes;
      ASSERT_GE(p.byte_in_page / remote_sector_bytes, first);
      ASSERT_LT(p.byte_in_page / remote_sector_bytes, first + sectors);
    }
    const std::uint32_t priced = static_cast<std::uint32_t>(named.size()) * per_probe;
    ASSERT_GE(priced, sectors);
    ASSERT_LT(priced, sectors + per_probe);
  }
}

}  // namespace
}  // namespace warpvm::detail
