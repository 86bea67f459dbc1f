#pragma once
// stencil2gpu: a 2D grid split between two GPUs, each running a persistent kernel over its half;
// every iteration each GPU produces its boundary row for the other and consumes the other's.
// stencil_run takes the exchange as a template argument: the channel bench's (Stencil2Gpu, the
// modes of PeerExchange) or NVSHMEM's (bench/channel/stencil_nvshmem.cu). Host reference:
// stencil_reference (integers: the same bits).

#include "warpvm/workloads/channel/peer_exchange.cuh"

#include <cuda/atomic>

#include <cstdint>
#include <vector>

namespace warpvm::workloads {

/// The Jacobi-style 5-point update (every cell from the previous iteration's values; integers,
/// so the host reference gets the same bits). A neighbour outside the grid reads as 0.
__host__ __device__ inline std::uint32_t stencil_update(std::uint32_t c, std::uint32_t north, std::uint32_t south,
                                                        std::uint32_t west, std::uint32_t east) {
  return (north + south + west + east) ^ (c * 0x9e3779b1u);
}

/// `iterations` updates of the whole side x side grid on the host, from `grid`: the reference,
/// computed without the split in two. `parallel_for(n, body)` runs body(first, end) over a split
/// of [0, n).
template <class ParallelFor>
std::vector<std::uint32_t> stencil_reference(std::vector<std::uint32_t> grid, std::uint32_t side,
                                             std::uint32_t iterations, ParallelFor&& parallel_for) {
  const std::uint64_t n = side;
  const std::vector<std::uint32_t> outside(n, 0);  // the rows above and below the grid
  std::vector<std::uint32_t> next(grid.size());
  for (std::uint32_t k = 0; k < iterations; ++k) {
    parallel_for(n, [&](std::uint64_t first, std::uint64_t end) {
      for (std::uint64_t y = first; y < end; ++y) {
        const std::uint32_t* row = grid.data() + y * n;
        const std::uint32_t* north = y > 0 ? row - n : outside.data();
        const std::uint32_t* south = y + 1 < n ? row + n : outside.data();
        std::uint32_t* out = next.data() + y * n;
        for (std::uint64_t x = 0; x < n; ++x)
          out[x] = stencil_update(row[x], north[x], south[x], x > 0 ? row[x - 1] : 0u, x + 1 < n ? row[x + 1] : 0u);
      }
    });
    grid.swap(next);
  }
  return grid;
}

/// Rows per block at least: the block that owns the boundary row has rows to update before it
/// waits for the other GPU's.
constexpr std::uint32_t stencil_min_rows_per_block = 4;
/// One GPU's blocks at most for a side x side grid (fewer when fewer fit at once).
constexpr std::uint32_t stencil_max_blocks(std::uint32_t side) { return side / 2 / stencil_min_rows_per_block; }
/// The grids stencil2gpu runs (warpvm-channel-bench and warpvm-stencil-nvshmem refuse others):
/// eight warps' column slices of whole 16-byte granules.
constexpr bool stencil_side_runs(std::uint32_t side) { return side >= 64 && side % 64 == 0 && side <= 32768; }
inline constexpr const char* stencil_side_rule = "--stencil-side must be a multiple of 64 up to 32768";

/// One GPU's half of a side x side grid of uint32: GPU 0 owns rows [0, side / 2), GPU 1 rows
/// [side / 2, side). The cut row (GPU 0's last, GPU 1's first) is the one whose neighbour across
/// the cut lives on the other GPU: every iteration each GPU produces its cut row for the other
/// and consumes the other's. Block b owns local rows [b rows / blocks, (b + 1) rows / blocks);
/// the block that owns the cut row (the cut block) does the exchange, one column slice per warp.
/// How the rows cross is the exchange's (stencil_run's template argument): Stencil2Gpu below,
/// or NVSHMEM (stencil_nvshmem.cu).
struct StencilHalf {
  std::uint32_t side, iterations;
  bool neighbour_below;     ///< GPU 0: the other half lies below its last row; GPU 1: above its first
  std::uint32_t* cells;     ///< this GPU, [2][side / 2][side]: iteration k reads cells[k % 2]
  std::uint32_t* progress;  ///< this GPU, [blocks]: iterations each block has finished
  /// `lives` by global warp; `waits` and `wait_counts` by the cut block's warp (0 to 7): only it waits
  Stamps stamps;
};

/// The channel bench's exchange (the modes of PeerExchange). channel, channel_direct: the cut
/// row of state k (the grid after k iterations) at k * side words, tag k. peer_flag, naive,
/// atomic_wait: the neighbour stores its cut row of state k into halo[k % 2], then k + 1 into
/// exchange.published (the count of its rows there so far).
struct Stencil2Gpu {
  StencilHalf grid;
  PeerExchange exchange;
  const std::uint32_t* halo;      ///< this GPU, [2][side]
  std::uint32_t* neighbour_halo;  ///< the neighbour's `halo` (a peer address)

  /// The cut block's thread: its value `v` of column x in the cut row of state `state`, for the
  /// neighbour (its channel's buffer, in this GPU's memory or, channel_direct with the buffer on
  /// the consumer, over NVLink; or the neighbour's halo over NVLink).
  __device__ void send(std::uint32_t state, std::uint32_t x, std::uint32_t v) const {
    if (uses_channel(exchange.mode))
      reinterpret_cast<std::uint32_t*>(exchange.to_neighbour.buffer())[std::uint64_t{state} * grid.side + x] = v;
    else
      neighbour_halo[std::uint64_t{state % 2} * grid.side + x] = v;
  }
  /// The cut block, after a __syncthreads that follows every send of state `state` (whose cut
  /// row is `row`, sent already element by element): announces it.
  __device__ void announce(std::uint32_t state, const std::uint32_t* /*row*/) const {
    if (threadIdx.x == 0) peer_announce(exchange, state);
  }
  /// Every warp of the cut block: the other GPU's cut row of state `state` from `first_column`,
  /// `slice` columns (the channel's buffer, in place for channel_direct, or the halo).
  __device__ PeerWindow meet(std::uint32_t state, std::uint32_t first_column, std::uint32_t slice) const {
    return peer_meet(exchange, "stencil2gpu", state, slice * 4, (std::uint64_t{state} * grid.side + first_column) * 4,
                     halo + std::uint64_t{state % 2} * grid.side + first_column, grid.stamps, threadIdx.x / 32);
  }
};

/// Cell x of local row y of `cur` (rows x side); `north_outside` / `south_outside` stand for the
/// row above the first / below the last (0 at the grid's edge, the other GPU's row at the cut).
__device__ inline std::uint32_t stencil_cell(const std::uint32_t* cur, std::uint32_t rows, std::uint32_t side,
                                             std::uint32_t y, std::uint32_t x, std::uint32_t north_outside,
                                             std::uint32_t south_outside) {
  const std::uint64_t at = std::uint64_t{y} * side + x;
  // L2 loads: rows next to the block's own were written by other SMs
  return stencil_update(__ldcg(cur + at), y > 0 ? __ldcg(cur + at - side) : north_outside,
                        y + 1 < rows ? __ldcg(cur + at + side) : south_outside, x > 0 ? __ldcg(cur + at - 1) : 0u,
                        x + 1 < side ? __ldcg(cur + at + 1) : 0u);
}

/// Persistent: every block of the grid must be resident at once (blocks wait for their
/// neighbours, the cut block for the other GPU). Per iteration k a block waits until the blocks
/// next to it finished iteration k - 1, updates its rows except the cut row (no other GPU
/// involved: the part that hides the exchange), then the cut block meets the other GPU's cut row
/// of state k, updates its cut row and sends it as state k + 1.
///
/// Why a two-slot halo (peer_flag, naive, atomic_wait, NVSHMEM) is never overwritten unread: the
/// neighbour writes state j >= 2 into slot j % 2 in its iteration j - 1, after its cut block
/// saw this GPU's state j - 1 arrive (acquire). This GPU announces state j - 1 after its
/// __syncthreads of iteration j - 2, which follows every read of slot (j - 2) % 2 = j % 2
/// (state j - 2) by its cut block, so those reads happen before the neighbour's writes. The
/// channel needs no such argument: each state has its own row in the buffer (a tag is published
/// once until reset).
template <class Exchange>
__device__ void stencil_run(const StencilHalf& s, const Exchange& exchange) {
  const std::uint32_t side = s.side, rows = side / 2, blocks = gridDim.x, b = blockIdx.x;
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool cut_block = b == (s.neighbour_below ? blocks - 1 : 0);
  const std::uint32_t cut = s.neighbour_below ? rows - 1 : 0;
  const auto first_row = static_cast<std::uint32_t>(std::uint64_t{b} * rows / blocks);
  const auto end_row = static_cast<std::uint32_t>(std::uint64_t{b + 1} * rows / blocks);
  // the rows this block updates before the exchange: all of its own but the cut row
  const std::uint32_t inner_first = cut_block && !s.neighbour_below ? first_row + 1 : first_row;
  const std::uint32_t inner_end = cut_block && s.neighbour_below ? end_row - 1 : end_row;
  // the cut row's columns of this warp (and its window of the other GPU's row)
  const std::uint32_t slice = side / block_warps, first_column = warp_in_block * slice;
  const std::uint64_t half = std::uint64_t{rows} * side;

  if (cut_block) {  // state 0: the initial cut row
    for (std::uint32_t x = threadIdx.x; x < side; x += block_threads) exchange.send(0, x, s.cells[cut * side + x]);
    __syncthreads();
    exchange.announce(0, s.cells + std::uint64_t{cut} * side);
  }
  for (std::uint32_t k = 0; k < s.iterations; ++k) {
    const std::uint32_t* cur = s.cells + (k % 2) * half;
    std::uint32_t* next = s.cells + ((k + 1) % 2) * half;
    // The blocks next to this one finished iteration k - 1: their rows of cur are written, and
    // they no longer read next (their cur of iteration k - 1), which this iteration overwrites.
    if (threadIdx.x == 0) {
      if (b > 0) wait_at_least<cuda::thread_scope_device>(s.progress[b - 1], k, "stencil2gpu", "a neighbouring block", k);
      if (b + 1 < blocks)
        wait_at_least<cuda::thread_scope_device>(s.progress[b + 1], k, "stencil2gpu", "a neighbouring block", k);
    }
    __syncthreads();
    const std::uint32_t inner_cells = (inner_end - inner_first) * side;
    for (std::uint32_t i = threadIdx.x; i < inner_cells; i += block_threads) {
      const std::uint32_t y = inner_first + i / side, x = i % side;
      next[std::uint64_t{y} * side + x] = stencil_cell(cur, rows, side, y, x, 0u, 0u);  // 0: the grid's edge
    }
    if (cut_block) {
      const auto other = exchange.meet(k, first_column, slice);  // the other GPU's cut row of state k
      for (std::uint32_t x = first_column + lane; x < first_column + slice; x += 32) {
        const std::uint32_t h = other.template load<std::uint32_t>(x - first_column);
        const std::uint32_t v = stencil_cell(cur, rows, side, cut, x, s.neighbour_below ? 0u : h, s.neighbour_below ? h : 0u);
        next[std::uint64_t{cut} * side + x] = v;
        if (k + 1 < s.iterations) exchange.send(k + 1, x, v);
      }
      other.release();
    }
    __syncthreads();  // the block's reads of cur and the halo, its stores of next and of the row sent
    if (cut_block && k + 1 < s.iterations) exchange.announce(k + 1, next + std::uint64_t{cut} * side);
    if (threadIdx.x == 0)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(s.progress[b]).store(k + 1, cuda::std::memory_order_release);
  }
  s.stamps.life(b * block_warps + warp_in_block, started, cut_block);
}

__global__ void __launch_bounds__(block_threads) stencil2gpu_kernel(Stencil2Gpu s) {
  stencil_run(s.grid, s);
  peer_block_done(s.exchange);
}

}  // namespace warpvm::workloads
