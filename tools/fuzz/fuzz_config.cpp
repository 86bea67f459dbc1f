#include "fuzz_config.hpp"

#include "warpvm/detail/core/geometry.hpp"

#include <algorithm>
#include <sstream>

namespace warpvm::fuzz {
namespace {

constexpr std::uint64_t B = 1, KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

/// Objects of at most this many pages may be made resident.
constexpr std::uint64_t max_resident_pages = 64;

std::vector<Cell> make_cells(Grid grid) {
  std::vector<Cell> out;
  const auto both = [&](std::uint64_t page, std::uint32_t ratio, bool large, std::uint32_t weight) {
    for (EvictionPolicy e : {EvictionPolicy::clock, EvictionPolicy::fifo}) out.push_back({page, e, ratio, large, weight});
  };
  switch (grid) {
    case Grid::ci:
      for (std::uint64_t page : {512 * B, 1 * KiB, 4 * KiB})
        for (std::uint32_t ratio : {1u, 2u, 4u, 16u, 64u, 256u}) both(page, ratio, false, 1);
      break;
    case Grid::quick:
      for (std::uint32_t ratio : {1u, 4u, 64u}) both(4 * KiB, ratio, false, 1);
      both(512 * B, 16, false, 1);
      both(64 * KiB, 4, true, 1);
      break;
    case Grid::full:
      for (std::uint64_t page : {512 * B, 1 * KiB, 2 * KiB, 4 * KiB, 16 * KiB})
        for (std::uint32_t ratio : {1u, 2u, 4u, 16u, 64u, 256u}) both(page, ratio, false, 8);
      // Large pages at 256 resident threads and the minimum legal cache: each seed moves up to a
      // GiB, so they take fewer seeds.
      for (std::uint32_t ratio : {1u, 4u, 64u}) both(64 * KiB, ratio, true, 2);
      for (std::uint32_t ratio : {1u, 16u}) both(256 * KiB, ratio, true, 1);
      both(1 * MiB, 2, true, 1);
      for (std::uint32_t ratio : {1u, 2u}) both(2 * MiB, ratio, true, 1);
      break;
  }
  return out;
}

/// Pinned bytes a run may use: small pages keep seeds fast; large pages need room for 256
/// threads' frames times the oversubscription.
std::uint64_t byte_cap(Grid grid, bool large) {
  if (grid == Grid::ci) return 4 * MiB;
  return large ? 1 * GiB : 32 * MiB;
}

}  // namespace

const char* to_string(Grid grid) {
  switch (grid) {
    case Grid::ci: return "ci";
    case Grid::quick: return "quick";
    case Grid::full: return "full";
  }
  return "?";
}

bool parse_grid(const std::string& name, Grid& grid) {
  for (Grid g : {Grid::ci, Grid::quick, Grid::full})
    if (name == to_string(g)) {
      grid = g;
      return true;
    }
  return false;
}

const char* to_string(Boundary boundary) {
  switch (boundary) {
    case Boundary::keep: return "keep";
    case Boundary::flush: return "flush";
    case Boundary::host_write: return "host_write";
    case Boundary::drop: return "drop";
  }
  return "?";
}

const std::vector<Cell>& cells(Grid grid) {
  static const std::vector<Cell> ci = make_cells(Grid::ci), quick = make_cells(Grid::quick),
                                 full = make_cells(Grid::full);
  return grid == Grid::ci ? ci : grid == Grid::quick ? quick : full;
}

std::uint64_t RunConfig::data_bytes() const {
  std::uint64_t sum = 0;
  for (std::uint32_t o = 0; o < object_count; ++o) sum += object_bytes(o);
  return sum;
}

Program RunConfig::program(std::uint32_t launch) const {
  Program p{};
  p.seed = seed;
  p.launch = launch;
  p.threads = threads;
  p.steps = steps;
  p.holds = holds;
  const detail::PageGeometry geometry{detail::log2_exact(shape.page_bytes)};
  for (std::uint32_t o = 0; o < object_count; ++o) {
    p.elements[o] = elements[o];
    p.element_shift[o] = geometry.element_shift(element_sizes[o]);
  }
  return p;
}

std::string RunConfig::describe() const {
  std::ostringstream out;
  out << "page " << shape.page_bytes << " B, " << warpvm::to_string(shape.eviction) << ", "
      << shape.oversubscription << "x, " << threads << " threads x " << holds << " holds, " << frames << " frames, "
      << launches() << " launches x " << steps << " steps";
  return out.str();
}

RunConfig make_run(std::uint64_t seed, Grid grid) {
  const std::vector<Cell>& all = cells(grid);
  std::uint64_t total_weight = 0;
  for (const Cell& c : all) total_weight += c.weight;
  // Seeds sweep the cells in turn, each cell taking `weight` consecutive positions.
  std::uint64_t position = seed % total_weight;
  std::uint32_t cell = 0;
  while (position >= all[cell].weight) position -= all[cell++].weight;

  RunConfig r;
  r.seed = seed;
  r.grid = grid;
  r.cell = cell;
  r.shape = all[cell];
  Choices pick(draw(seed, 0x6772696400ull, static_cast<std::uint64_t>(grid)));

  const std::uint64_t page = r.shape.page_bytes;
  static constexpr std::uint32_t thread_choices[] = {32, 64, 128, 256, 512, 1024};
  const std::uint32_t most_thread_choices = grid == Grid::ci ? 3 : 6;
  r.threads = r.shape.large ? 256 : thread_choices[pick.below(most_thread_choices)];
  r.holds = 1 + static_cast<std::uint32_t>(pick.below(r.shape.large ? 2 : 4));
  const auto bytes_needed = [&] { return std::uint64_t{r.threads} * r.holds * r.shape.oversubscription * page; };
  const std::uint64_t cap = byte_cap(grid, r.shape.large);
  while (!r.shape.large && r.threads > 32 && bytes_needed() > cap) r.threads /= 2;
  while (r.holds > 1 && bytes_needed() > cap) --r.holds;
  r.block = std::min<std::uint32_t>(r.threads, 32u << pick.below(4));
  r.frames = r.threads * r.holds;
  r.checked = pick.below(4) == 0;

  // Pages: counters one or two each, the rest shared by the data objects (each at least one).
  std::uint64_t pages[object_count]{};
  const std::uint64_t data_pages = std::max<std::uint64_t>(std::uint64_t{r.frames} * r.shape.oversubscription, object_count);
  std::uint64_t left = data_pages;
  for (std::uint32_t o = first_counter; o < object_count; ++o) left -= pages[o] = 1 + pick.below(2);
  std::uint64_t weights[data_objects]{}, weight_sum = 0;
  for (std::uint32_t o = 0; o < data_objects; ++o) weight_sum += weights[o] = 1 + pick.below(8);
  std::uint64_t given = 0;
  for (std::uint32_t o = 0; o < data_objects; ++o) {
    pages[o] = o + 1 < data_objects ? std::max<std::uint64_t>(1, left * weights[o] / weight_sum)
                                    : std::max<std::uint64_t>(1, left - std::min(left, given));
    given += pages[o];
  }
  for (std::uint32_t o = 0; o < object_count; ++o) {
    const std::uint64_t per_page = page / element_sizes[o];
    r.elements[o] = pages[o] * per_page - pick.below(per_page);  // a partial last page, mostly
  }

  const std::uint32_t launches = 2 + static_cast<std::uint32_t>(pick.below(3));
  r.steps = r.shape.large
                ? static_cast<std::uint32_t>(std::clamp<std::uint64_t>((512 * MiB) / (std::uint64_t{r.threads} * page), 2, 16))
                : 8 + static_cast<std::uint32_t>(pick.below(grid == Grid::ci ? 16 : 40));
  for (std::uint32_t l = 0; l < launches; ++l) {
    std::array<Placement, object_count> placement{};
    for (std::uint32_t o = 0; o < object_count; ++o) {
      const std::uint64_t p = pick.below(8);
      placement[o] = p < 3 ? Placement::migrate : p < 5 ? Placement::automatic : p < 7 ? Placement::remote
                   : r.object_pages(o) <= max_resident_pages ? Placement::resident : Placement::migrate;
    }
    r.placements.push_back(placement);
    if (l + 1 < launches) r.boundaries.push_back(static_cast<Boundary>(pick.below(4)));
  }
  // Twice the resident objects' pages: a first-fit area can fragment as objects come and go.
  for (std::uint32_t o = 0; o < object_count; ++o)
    if (r.object_pages(o) <= max_resident_pages) r.resident_bytes += 2 * r.object_pages(o) * page;
  return r;
}

}  // namespace warpvm::fuzz
