#pragma once
/// @file
/// A fuzz run's configuration, drawn from (seed, grid) alone, so that `--seed S --grid G`
/// reproduces it anywhere: the cell of the grid (page size, eviction, oversubscription), the
/// threads and the pages each may hold, the minimum legal cache for them, the objects' sizes,
/// each object's placement in each launch and what the host does between launches.

#include "fuzz_program.hpp"

#include "warpvm/config.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace warpvm::fuzz {

/// The grids: `ci` is small enough for the simulator in CI (200 seeds in seconds), `quick` for
/// the GPU test suite, `full` for the GPU fuzzer's thousands of seeds.
enum class Grid : std::uint8_t { ci, quick, full };
[[nodiscard]] const char* to_string(Grid grid);
/// The grid named `name`; false when there is none.
[[nodiscard]] bool parse_grid(const std::string& name, Grid& grid);

/// One configuration of the grid.
struct Cell {
  std::uint64_t page_bytes;
  EvictionPolicy eviction;
  std::uint32_t oversubscription;  ///< data pages per frame of the (minimum legal) cache
  bool large;                      ///< large pages: 256 threads, at most 2 holds each
  std::uint32_t weight;            ///< share of the seeds, relative to the grid's other cells
};

/// What the host does after a launch (before the next).
enum class Boundary : std::uint8_t {
  keep,        ///< nothing: dirty pages stay cached into the next launch
  flush,       ///< Runtime::flush(), then host() is checked exact
  host_write,  ///< flush(), writes into host(), drop_cached()
  drop,        ///< drop_cached()
};
[[nodiscard]] const char* to_string(Boundary boundary);

struct RunConfig {
  std::uint64_t seed = 0;
  Grid grid = Grid::full;
  std::uint32_t cell = 0;  ///< index into the grid's cells
  Cell shape{};
  std::uint32_t threads = 0;
  std::uint32_t block = 0;  ///< threads per block
  std::uint32_t holds = 0;
  std::uint32_t steps = 0;
  std::uint32_t frames = 0;  ///< the cache: threads x holds, the least the launch check accepts
  std::uint64_t elements[object_count]{};
  std::vector<std::array<Placement, object_count>> placements;  ///< per launch
  std::vector<Boundary> boundaries;                              ///< after each launch but the last
  bool checked = false;               ///< Config::checked: bounds and stale-handle checks
  std::uint64_t resident_bytes = 0;  ///< Config::resident_bytes: room for every object allowed resident

  [[nodiscard]] std::uint32_t launches() const { return static_cast<std::uint32_t>(placements.size()); }
  [[nodiscard]] std::uint64_t object_bytes(std::uint32_t o) const { return elements[o] * element_sizes[o]; }
  [[nodiscard]] std::uint64_t object_pages(std::uint32_t o) const {
    return (object_bytes(o) + shape.page_bytes - 1) / shape.page_bytes;
  }
  [[nodiscard]] std::uint64_t data_bytes() const;
  /// The interpreter's view of launch `launch`.
  [[nodiscard]] Program program(std::uint32_t launch) const;
  /// One line: page size, eviction, oversubscription, threads, holds, frames.
  [[nodiscard]] std::string describe() const;
};

[[nodiscard]] const std::vector<Cell>& cells(Grid grid);
/// The run of `seed` in `grid`.
[[nodiscard]] RunConfig make_run(std::uint64_t seed, Grid grid);

}  // namespace warpvm::fuzz
