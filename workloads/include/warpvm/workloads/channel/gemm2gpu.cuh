#pragma once
// gemm2gpu: GEMM streaming between two GPUs (issue #7's G_GEM: multiple transfers per iteration).
//
// C = (A B) D, n x n matrices of uint32 (arithmetic mod 2^32, so the host reference gets the same
// bits). GPU g holds A's rows [g h, (g + 1) h) (h = n / 2), all of B, and D's columns
// [g h, (g + 1) h). It produces its rows of T = A B, panel by panel (gemm_tile rows each),
// and streams every panel to the other GPU as soon as it is complete: one tag per panel. It
// consumes every panel of T, its own and the other GPU's, into its columns of C = T D. So each
// GPU sends h x n words and needs all of the other's, and while a panel crosses NVLink the GPU
// goes on producing the next ones.
//
// One persistent kernel per GPU, every block resident. Block 0 is the exchange block: for each
// panel p it waits until this GPU's tiles of panel p are all written (they store it themselves
// into the other GPU's channel buffer or T, over NVLink or locally, see Gemm2Gpu), announces it,
// then meets the other GPU's panel p (channel modes: copies it from its window into T) and sets
// ready[p]. The other blocks take 64 x 64 tiles from one queue, in steps: step s produces panel
// s and consumes panels s - 1 (this GPU's, then the other's, waiting for ready[s - 1]). So the
// other GPU's panel has one step of production to arrive in. In channel_direct mode the
// exchange block only announces: a tile block's first warp acquires the other GPU's panel, and
// after a barrier the block reads it in place (a direct acquire is a poll of the GPU's own map).

#include "warpvm/workloads/channel/peer_exchange.cuh"

#include <cstdint>
#include <vector>

namespace warpvm::workloads {

/// The tile product's depth per shared-memory step.
constexpr std::uint32_t gemm_depth_step = 16;

/// One GPU's part. Layouts are row-major.
struct Gemm2Gpu {
  PeerExchange exchange;
  GemmGeometry size;
  bool first_half;          ///< GPU 0: A's and D's first halves, T's first h rows
  const std::uint32_t* a;   ///< [h][n]: this GPU's rows of A
  const std::uint32_t* b;   ///< [n][n]
  const std::uint32_t* d;   ///< [n][h]: this GPU's columns of D
  std::uint32_t* t;         ///< [n][n]: all of T; this GPU writes its rows, the other GPU's arrive
  std::uint32_t* c;         ///< [n][h]: this GPU's columns of C
  std::uint32_t* next_tile; ///< the tile queue's head, 0 before the run
  std::uint32_t* produced;  ///< [panels]: this GPU's tiles of each panel written so far
  std::uint32_t* ready;     ///< [panels]: 1 once the other GPU's panel is in T
  // channel, channel_direct: this GPU's panel p at p x panel words of the other GPU's channel
  // buffer (to_neighbour.buffer()), tag p. peer_flag, naive, atomic_wait: straight into the
  // other GPU's T (its rows of this GPU's half), then p + 1 into exchange.published
  std::uint32_t* neighbour_t;  ///< the other GPU's `t` (a peer address)
  /// Lives and waits by global warp: the exchange block's for the other GPU's panels, the tile
  /// blocks' for the panels they consume.
  Stamps stamps;

  [[nodiscard]] __host__ __device__ std::uint32_t half() const { return size.half(); }
  /// First row in T of this GPU's half (`mine`) or of the other's.
  [[nodiscard]] __host__ __device__ std::uint64_t t_rows_of(bool mine) const {
    return mine == first_half ? 0 : half();
  }
};

/// The shared memory of one tile product: a depth step of the left operand (transposed) and of the right.
struct GemmShared {
  std::uint32_t left[gemm_depth_step][gemm_tile + 4];
  std::uint32_t right[gemm_depth_step][gemm_tile];
};

/// Block-collective: acc (4 x 4 per thread, rows ty + 16 i, columns tx + 16 j with ty, tx =
/// threadIdx.x / 16, % 16) = left[64 x depth] (row stride `left_stride`) x right[depth x 64]
/// (row stride `right_stride`), mod 2^32. The left operand through L2 (`left_in_l2`: T, written
/// by other SMs and the other GPU during the kernel), the right one through the read-only path.
__device__ inline void gemm_tile_product(const std::uint32_t* left, std::uint64_t left_stride, bool left_in_l2,
                                         const std::uint32_t* right, std::uint64_t right_stride, std::uint32_t depth,
                                         std::uint32_t (&acc)[4][4], GemmShared& sh) {
  const std::uint32_t ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  for (auto& row : acc)
    for (std::uint32_t& v : row) v = 0;
  for (std::uint32_t k0 = 0; k0 < depth; k0 += gemm_depth_step) {
    for (std::uint32_t i = threadIdx.x; i < gemm_tile * gemm_depth_step; i += block_threads) {
      const std::uint32_t row = i / gemm_depth_step, kk = i % gemm_depth_step;  // 16 lanes a row: 64 bytes
      const std::uint32_t* at = left + row * left_stride + k0 + kk;
      sh.left[kk][row] = left_in_l2 ? __ldcg(at) : __ldg(at);
      const std::uint32_t rk = i / gemm_tile, column = i % gemm_tile;
      sh.right[rk][column] = __ldg(right + (k0 + rk) * right_stride + column);
    }
    __syncthreads();
#pragma unroll
    for (std::uint32_t kk = 0; kk < gemm_depth_step; ++kk) {
      std::uint32_t l[4], r[4];
#pragma unroll
      for (std::uint32_t i = 0; i < 4; ++i) {
        l[i] = sh.left[kk][ty + 16 * i];
        r[i] = sh.right[kk][tx + 16 * i];
      }
#pragma unroll
      for (std::uint32_t i = 0; i < 4; ++i)
#pragma unroll
        for (std::uint32_t j = 0; j < 4; ++j) acc[i][j] += l[i] * r[j];
    }
    __syncthreads();  // before the next step's loads overwrite the operands
  }
}

/// A tile block's entry `task`.
__device__ inline void gemm_run_task(const Gemm2Gpu& m, GemmTask task, GemmShared& sh) {
  const std::uint32_t n = m.size.n, h = m.half(), ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  std::uint32_t acc[4][4];
  if (task.kind == GemmTask::produce) {
    const std::uint64_t row = std::uint64_t{task.panel} * gemm_tile, column = std::uint64_t{task.tile} * gemm_tile;
    gemm_tile_product(m.a + row * n, n, false, m.b + column, n, n, acc, sh);
    std::uint32_t* mine = m.t + (m.t_rows_of(true) + row) * n + column;
    // the other GPU's copy: its channel's buffer at this panel, or its T's rows of this GPU's half
    std::uint32_t* theirs =
        uses_channel(m.exchange.mode)
            ? reinterpret_cast<std::uint32_t*>(m.exchange.to_neighbour.buffer()) + task.panel * m.size.panel_words() + column
            : m.neighbour_t + (m.t_rows_of(true) + row) * n + column;
    for (std::uint32_t i = 0; i < 4; ++i)
      for (std::uint32_t j = 0; j < 4; ++j) {
        const std::uint64_t at = std::uint64_t{ty + 16 * i} * n + tx + 16 * j;
        mine[at] = acc[i][j];
        theirs[at] = acc[i][j];
      }
    __syncthreads();  // every thread's stores before thread 0's release (cumulative)
    if (threadIdx.x == 0)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(m.produced[task.panel])
          .fetch_add(1u, cuda::std::memory_order_release);
    return;
  }
  const bool own = task.kind == GemmTask::consume_own;
  const std::uint64_t row = m.t_rows_of(own) + std::uint64_t{task.panel} * gemm_tile;
  const std::uint64_t column = std::uint64_t{task.tile} * gemm_tile;
  if (!own && m.exchange.mode == WaitMode::channel_direct) {
    // Direct mode: the block's first warp acquires the other GPU's panel (a poll of this GPU's
    // map) and the block reads it in place, in the channel's buffer: no exchange-block copy. The
    // barrier extends that warp's acquire to the block, as for the baselines' flag; with every
    // warp acquiring, this branch was 3-5% behind peer_flag (docs/bench/channel.md, gemm2gpu). Direct
    // mode has nothing to release (with staging the warp would release after a second barrier).
    __shared__ const std::uint32_t* panel_data;
    const std::uint64_t began = detail::global_timer_ns();
    const std::uint64_t arrived = block_waits_for_thread0<32>([&] {
      const std::uint64_t bytes = m.size.panel_words() * 4;
      const channel_data panel =
          m.exchange.from_neighbour.acquire(task.panel, 1, static_cast<std::uint32_t>(bytes), task.panel * bytes);
      if (threadIdx.x == 0) panel_data = panel.as<std::uint32_t>();
    });
    m.stamps.wait(blockIdx.x * block_warps + threadIdx.x / 32, began, arrived);
    gemm_tile_product(panel_data, n, true, m.d + column, h, n, acc, sh);
  } else {
    if (own)
      block_waits_at_least(m.produced[task.panel], m.size.production_tiles(), m.stamps, "gemm2gpu", "this GPU's panel",
                           task.panel);
    else
      block_waits_at_least(m.ready[task.panel], 1, m.stamps, "gemm2gpu", "the other GPU's panel", task.panel);
    gemm_tile_product(m.t + row * n, n, true, m.d + column, h, n, acc, sh);
  }
  for (std::uint32_t i = 0; i < 4; ++i)
    for (std::uint32_t j = 0; j < 4; ++j) m.c[(row + ty + 16 * i) * h + column + tx + 16 * j] = acc[i][j];
}

/// The exchange block: for each panel, announce this GPU's once its tiles are written, then meet
/// the other GPU's, put it into T (channel modes: out of the window; the baselines' producer
/// stored it there) and set ready.
__device__ inline void gemm_exchange(const Gemm2Gpu& m) {
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t window_words = m.size.panel_words() / block_warps;
  for (std::uint32_t p = 0; p < m.size.panels(); ++p) {
    if (threadIdx.x == 0) {
      wait_at_least(m.produced[p], m.size.production_tiles(), "gemm2gpu", "this GPU's panel", p);
      peer_announce(m.exchange, p);  // release at system scope: cumulative over the tiles' stores it acquired
    }
    if (m.exchange.mode == WaitMode::channel_direct) continue;  // the tile blocks acquire the other GPU's panels
    std::uint32_t* into = m.t + (m.t_rows_of(false) + std::uint64_t{p} * gemm_tile) * m.size.n + warp_in_block * window_words;
    const PeerWindow other =
        peer_meet(m.exchange, "gemm2gpu", p, static_cast<std::uint32_t>(window_words * 4),
                  (p * m.size.panel_words() + warp_in_block * window_words) * 4, into, m.stamps, warp_in_block);
    if (other.grant) {  // 16-byte copies: windows are whole rows of n (a multiple of 128) words
      const auto* from = reinterpret_cast<const uint4*>(other.data);
      auto* to = reinterpret_cast<uint4*>(into);
      for (std::uint64_t i = lane; i < window_words / 4; i += 32) to[i] = from[i];
    }
    other.release();
    __syncthreads();  // every warp's part of T before thread 0's release (cumulative)
    if (threadIdx.x == 0)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(m.ready[p]).store(1u, cuda::std::memory_order_release);
  }
}

/// Persistent: every block resident at once (tile blocks wait for panels that other blocks and
/// the other GPU produce). At least two blocks.
__global__ void __launch_bounds__(block_threads) gemm2gpu_kernel(Gemm2Gpu m) {
  __shared__ GemmShared sh;
  const std::uint64_t started = detail::global_timer_ns();
  const bool exchange_block = blockIdx.x == 0;
  if (exchange_block) {
    gemm_exchange(m);
  } else {
    const std::uint32_t total = m.size.total_tiles();
    for (;;) {
      const std::uint32_t q = block_takes_task(m.next_tile);
      if (q >= total) break;
      gemm_run_task(m, gemm_task(q, m.size), sh);
    }
  }
  // every warp is a consumer: the exchange block of the other GPU's panels, the tile blocks of
  // whole panels (their waits, for this GPU's or the other's, are waits for data to consume)
  m.stamps.life(blockIdx.x * block_warps + threadIdx.x / 32, started, true);
  peer_block_done(m.exchange);
}

/// out = left x right, n x n uint32 row-major (mod 2^32): the host reference's product (C = (A B) D
/// is two of them). `parallel_for(n, body)` runs body(first, end) over a split of [0, n).
template <class ParallelFor>
std::vector<std::uint32_t> gemm_host_product(const std::vector<std::uint32_t>& left,
                                             const std::vector<std::uint32_t>& right, std::uint32_t n,
                                             ParallelFor&& parallel_for) {
  std::vector<std::uint32_t> out(std::uint64_t{n} * n, 0);
  parallel_for(n, [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t i = first; i < end; ++i) {
      std::uint32_t* row = out.data() + i * n;
      for (std::uint64_t k = 0; k < n; ++k) {  // i-k-j: the inner loop vectorises
        const std::uint32_t l = left[i * n + k];
        const std::uint32_t* r = right.data() + k * n;
        for (std::uint64_t j = 0; j < n; ++j) row[j] += l * r[j];
      }
    }
  });
  return out;
}

}  // namespace warpvm::workloads
