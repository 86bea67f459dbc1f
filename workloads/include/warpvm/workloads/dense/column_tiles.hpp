#pragma once
// The tiled column product's split of an N x N row-major matrix into warp tiles, and the order
// the grid takes them in (host and device code: linear_algebra.cuh's kernels run it, the host
// tests replay it through the page-cache model).
//
// A tile is column_tile_height rows of column_tile_width neighbouring columns (1 KiB of each
// row), so the warp that owns it reads whole 128-byte lines of a page and holds the page once per
// 1 KiB of a row (when rows start on page boundaries and pages hold at least 1 KiB; otherwise a
// row's 1 KiB may take two pages); PolyBench's column product instead reads 128 bytes of a row per
// warp and jumps a row, which under eviction costs a page acquire per 128 bytes.
//
// The strips of columns are taken from the right. The row product before it walks every row left
// to right, so a cache smaller than A ends that pass holding the rows' right-hand pages: starting
// there, the column product finds them before it evicts them, and moves about (1 - cache share)
// of A instead of all of it (docs/bench/apps.md).

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::workloads {

/// Columns of a tile each lane sums, 32 apart (a warp load is 128 contiguous bytes). 8 keeps the
/// paged kernel at 122 registers, two blocks of 256 per SM; 16 takes it to 164 (one block), or
/// to 128 with spills under launch bounds.
inline constexpr std::uint32_t column_tile_lane_columns = 8;
/// Columns of a tile: 256 floats, 1 KiB of a row (a quarter of a 4 KiB page).
inline constexpr std::uint64_t column_tile_width = 32 * column_tile_lane_columns;
/// Rows of a tile: with about 2K warps in flight (two blocks per SM), a wave of tiles is 64 MiB,
/// 1.6% of a 32768^2 matrix, so the grid follows the order of the strips closely.
inline constexpr std::uint64_t column_tile_height = 32;

/// Rows [first_row, end_row) of columns [first_column, first_column + column_tile_width), the
/// columns cut at the matrix's edge.
struct ColumnTile {
  std::uint64_t first_row = 0;
  std::uint64_t end_row = 0;
  std::uint64_t first_column = 0;
};

/// The tiles of an n x n matrix, numbered in the order the grid takes them.
struct ColumnTiling {
  std::uint64_t n = 0;

  [[nodiscard]] WARPVM_HD std::uint64_t strips() const { return (n + column_tile_width - 1) / column_tile_width; }
  [[nodiscard]] WARPVM_HD std::uint64_t tiles_per_strip() const {
    return (n + column_tile_height - 1) / column_tile_height;
  }
  [[nodiscard]] WARPVM_HD std::uint64_t count() const { return strips() * tiles_per_strip(); }

  /// Tile t < count(): the strips from the rightmost to the leftmost, each top to bottom.
  [[nodiscard]] WARPVM_HD ColumnTile tile(std::uint64_t t) const {
    const std::uint64_t strip = strips() - 1 - t / tiles_per_strip();
    const std::uint64_t first_row = t % tiles_per_strip() * column_tile_height;
    const std::uint64_t end_row = first_row + column_tile_height < n ? first_row + column_tile_height : n;
    return {first_row, end_row, strip * column_tile_width};
  }
};

}  // namespace warpvm::workloads
