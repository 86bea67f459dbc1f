// The tiled column product's split of the matrix (warpvm/workloads/dense/column_tiles.hpp), which
// warpvm-apps-bench's kernels run: every entry in exactly one tile, the strips taken from the
// right, and, replayed through the page-cache model after the row product's pass, the reason for
// that order: the column pass finds the row pass's last pages instead of evicting them first.

#include "warpvm/workloads/dense/column_tiles.hpp"
#include "page_cache_model.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace warpvm::workloads {
namespace {

TEST(ColumnTiling, CoversEveryEntryOnce) {
  for (const std::uint64_t n : {1u, 31u, 32u, 33u, 255u, 256u, 257u, 1003u, 2048u}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ColumnTiling tiling{n};
    std::vector<std::uint8_t> seen(n * n, 0);
    for (std::uint64_t t = 0; t < tiling.count(); ++t) {
      const ColumnTile tile = tiling.tile(t);
      ASSERT_LT(tile.first_row, tile.end_row);
      ASSERT_LE(tile.end_row, n);
      ASSERT_LT(tile.first_column, n);
      ASSERT_EQ(tile.first_column % column_tile_width, 0u);
      for (std::uint64_t i = tile.first_row; i < tile.end_row; ++i)
        for (std::uint64_t j = tile.first_column; j < tile.first_column + column_tile_width && j < n; ++j)
          ++seen[i * n + j];
    }
    for (std::uint64_t k = 0; k < n * n; ++k) ASSERT_EQ(seen[k], 1) << "entry " << k;
  }
}

TEST(ColumnTiling, TakesTheStripsFromTheRightEachTopToBottom) {
  // The last strip and the last tile of each strip partial.
  constexpr std::uint64_t n = 7 * column_tile_width + 5 + column_tile_height / 2;
  const ColumnTiling tiling{n};
  ASSERT_EQ(tiling.strips(), 8u);
  const std::uint64_t per_strip = tiling.tiles_per_strip();
  EXPECT_EQ(per_strip * column_tile_height - n, column_tile_height / 2 - 5);
  EXPECT_EQ(tiling.tile(0).first_column, 7 * column_tile_width);
  EXPECT_EQ(tiling.tile(0).first_row, 0u);
  EXPECT_EQ(tiling.tile(per_strip - 1).end_row, n);
  EXPECT_EQ(tiling.tile(per_strip).first_column, 6 * column_tile_width);
  EXPECT_EQ(tiling.tile(per_strip).first_row, 0u);
  EXPECT_EQ(tiling.tile(tiling.count() - 1).first_column, 0u);
  for (std::uint64_t t = 1; t < tiling.count(); ++t) {
    const ColumnTile previous = tiling.tile(t - 1), tile = tiling.tile(t);
    if (tile.first_column == previous.first_column) EXPECT_EQ(tile.first_row, previous.end_row);
    else EXPECT_EQ(tile.first_column + column_tile_width, previous.first_column);
  }
}

/// Pages the column pass loads after the row pass, both replayed through the CLOCK cache model
/// at a quarter of the matrix's pages: the row pass as its threads walk, every row at once left
/// to right, then one acquire per tile row, tiles in `tile_order`.
std::uint64_t column_pass_loads(const std::function<ColumnTile(const ColumnTiling&, std::uint64_t)>& tile_order) {
  constexpr std::uint64_t n = 8192, page_elements = 1024, pages_per_row = n / page_elements, pages = n * pages_per_row;
  sim::PageCacheModel cache(static_cast<std::uint32_t>(pages / 4), EvictionPolicy::clock);
  const std::uint32_t a = cache.add_object(pages);
  auto touch = [&](std::uint64_t page) {
    cache.acquire(a, page, false);
    cache.release(a, page);
  };
  for (std::uint64_t p = 0; p < pages_per_row; ++p)
    for (std::uint64_t i = 0; i < n; ++i) touch(i * pages_per_row + p);
  const std::uint64_t row_pass_loads = cache.counts().loads;
  EXPECT_EQ(row_pass_loads, pages);
  const ColumnTiling tiling{n};
  for (std::uint64_t t = 0; t < tiling.count(); ++t) {
    const ColumnTile tile = tile_order(tiling, t);
    for (std::uint64_t i = tile.first_row; i < tile.end_row; ++i) touch((i * n + tile.first_column) / page_elements);
  }
  return cache.counts().loads - row_pass_loads;
}

TEST(ColumnTiling, ColumnPassFindsThePagesTheRowPassLeft) {
  constexpr std::uint64_t pages = 8192 * 8;
  const std::uint64_t from_the_right = column_pass_loads([](const ColumnTiling& t, std::uint64_t k) { return t.tile(k); });
  // The same tiles with the strips from the left: the row pass's last pages are evicted before
  // the pass gets to them.
  const std::uint64_t from_the_left = column_pass_loads([](const ColumnTiling& t, std::uint64_t k) {
    ColumnTile tile = t.tile(k);
    tile.first_column = (t.strips() - 1) * column_tile_width - tile.first_column;
    return tile;
  });
  EXPECT_EQ(from_the_right, pages - pages / 4);
  EXPECT_EQ(from_the_left, pages);
}

}  // namespace
}  // namespace warpvm::workloads
