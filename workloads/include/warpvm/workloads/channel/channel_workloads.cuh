#pragma once
// Workloads of warpvm-channel-bench beyond streaming tiles, shared with tests/gpu/channel_test.cu:
//
//   cg    conjugate gradient with the CPU and the GPU alternating inside one persistent kernel:
//         every iteration the GPU computes q = A p (a symmetric banded matrix, one window of p
//         per consumer warp) and hands q back through mapped pinned memory; the CPU does the dot
//         products and vector updates and publishes the next direction p
//   halo  a 3D cube of side^3 cells updated by a 7-point stencil, one z-plane per consumer warp;
//         every iteration the host produces the six face halos (six tags, six publishes) that
//         the boundary cells read
//   stencil2gpu  GPU to GPU: a 2D grid split between two GPUs, each running a persistent
//         kernel over its half; every iteration each GPU produces its boundary row for the other
//         and consumes the other's
//   kmeans2gpu  GPU to GPU: k-means over points split between two GPUs; every iteration each GPU
//         produces its per-centroid partial sums for the other and consumes the other's
//
// Consumer warps meet the producer's data one of four ways (WaitMode), each stamping when it
// started waiting and when its data had arrived (%globaltimer) for the metrics of
// overlap_metric.hpp. Host references: cg_reference and halo_reference (same arithmetic, fused
// multiply-adds on both sides, integers for the stencil).

#include "warpvm/workloads/channel/pair_schedules.hpp"
#include "warpvm/channel.hpp"

#include <cuda/atomic>
#include <cuda/std/optional>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace warpvm::workloads {

/// How consumer warps meet the producer's data.
enum class WaitMode : std::uint32_t {
  channel,      ///< warpvm::channel: acquire parks the warp; the data arrives in staging
  pinned_flag,  ///< lane 0 of each warp spins on per-tag flags in pinned host memory (acquire loads)
  naive,        ///< the paper's Algorithm 1: per block, __syncthreads, thread 0 spins, __syncthreads
  atomic_wait,  ///< lane 0 calls cuda::atomic_ref<..., thread_scope_system>::wait on each flag
  peer_flag,    ///< GPU to GPU: lane 0 of each warp spins on a flag in its GPU's memory that the peer stores
  channel_direct,  ///< GPU to GPU: warpvm::channel in direct mode: acquire polls the device map, reads in place
  /// GPU to GPU: warpvm::channel with a monitor warp (a one-warp kernel beside the workload's):
  /// acquire posts a request and parks, the monitor warp polls the map and wakes; reads in place
  channel_warp,
};

/// Whether the mode meets the data through a warpvm::channel (host monitor, direct or monitor warp).
__host__ __device__ constexpr bool uses_channel(WaitMode mode) {
  return mode == WaitMode::channel || mode == WaitMode::channel_direct || mode == WaitMode::channel_warp;
}

/// Per-warp stamps for the waiting metrics; a null `lives` records nothing.
struct Stamps {
  unsigned long long* lives;        ///< [warp][3]: start, end, (consumer << 32) | SM id
  unsigned long long* waits;        ///< [warp][capacity][2]: started waiting, data arrived
  std::uint32_t* wait_counts;       ///< [warp]
  std::uint32_t capacity;           ///< waits recorded per warp at most

  __device__ void wait(std::uint32_t warp, std::uint64_t began, std::uint64_t arrived) const {
    if (lives == nullptr || threadIdx.x % 32 != 0) return;
    const std::uint32_t i = wait_counts[warp];
    if (i >= capacity) return;  // sized for the workload; a longer run keeps its first waits
    waits[(std::uint64_t{warp} * capacity + i) * 2] = began;
    waits[(std::uint64_t{warp} * capacity + i) * 2 + 1] = arrived;
    wait_counts[warp] = i + 1;
  }
  __device__ void life(std::uint32_t warp, std::uint64_t started, bool consumer) const {
    if (lives == nullptr || threadIdx.x % 32 != 0) return;
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    lives[std::uint64_t{warp} * 3] = started;
    lives[std::uint64_t{warp} * 3 + 1] = detail::global_timer_ns();
    lives[std::uint64_t{warp} * 3 + 2] = (static_cast<std::uint64_t>(consumer) << 32) | sm;
  }
};

/// Where consumer warps find the producer's data.
struct Source {
  WaitMode mode;
  channel_handle ch;            ///< channel mode
  const std::byte* pinned;      ///< baselines: the producers' buffer (device address of mapped pinned memory)
  std::uint32_t* flags;         ///< baselines: one flag per tag in mapped pinned memory, 0 until published
  std::byte* scratch;           ///< baselines: `scratch_bytes` of device memory per consumer warp
  std::uint32_t scratch_bytes;
  Stamps stamps;
};

/// What a consumer warp reads until it calls finish().
struct Held {
  const std::byte* data = nullptr;
  cuda::std::optional<channel_data> grant;  ///< channel mode
};

__device__ inline void spin_on_flags(const Source& s, std::uint32_t first_tag, std::uint32_t tag_count) {
  for (std::uint32_t t = first_tag; t < first_tag + tag_count; ++t) {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> flag(s.flags[t]);
    if (s.mode == WaitMode::atomic_wait) {
      flag.wait(0u, cuda::std::memory_order_acquire);  // returns once the flag is no longer 0
    } else {  // Algorithm 1 polls with atomicAdd(&flag, 0): see channel_bench.cu on the H200
      while (flag.load(cuda::std::memory_order_acquire) != 1u) {
      }
    }
  }
}

/// Block-collective (Algorithm 1's shape): the block waits at a __syncthreads() while thread 0
/// runs `poll`; returns, to every thread, the time thread 0's poll ended: the end of the wait of
/// every warp of the block. Why not each warp's own %globaltimer read after the barrier: in the
/// SASS that read follows `BAR.SYNC.DEFER_BLOCKING`, yet the warps that only waited at the
/// barrier recorded waits of zero (kmeans2gpu's timeline, H200): a read that touches no memory
/// does not wait for the deferred barrier. Naive polling's `wait_share` and
/// `overlap_efficiency`, and kmeans2gpu's in every mode, described blocks that never waited.
///
/// `PollingThreads` 32: the whole first warp runs `poll` (a warp-collective wait, such as a
/// channel acquire one warp makes for its block) and thread 0 reads the time after it.
template <std::uint32_t PollingThreads = 1, class Poll>
__device__ std::uint64_t block_waits_for_thread0(Poll&& poll) {
  __shared__ std::uint64_t polled;
  __syncthreads();  // also: every thread has read the previous call's `polled` (and what `poll` shares)
  if (threadIdx.x < PollingThreads) {
    poll();
    if (threadIdx.x == 0) polled = detail::global_timer_ns();
  }
  __syncthreads();
  return polled;
}

/// Warp-collective (naive mode: block-collective, every warp of the block calls it): returns
/// `bytes` (a multiple of 4) of the producers' buffer from `offset` (a multiple of 4) once tags
/// [first_tag, +tag_count) are published, in device memory. The naive mode waits, per block, for
/// tags [block_first_tag, +block_tag_count), which must cover every warp's tags.
__device__ inline Held meet(const Source& s, std::uint32_t warp, std::uint32_t block_first_tag,
                            std::uint32_t block_tag_count, std::uint32_t first_tag, std::uint32_t tag_count,
                            std::uint32_t bytes, std::uint64_t offset) {
  const std::uint32_t lane = threadIdx.x % 32;
  __syncwarp();  // callers come from lane 0's work of the previous step: acquire as one group (see peer_meet)
  const std::uint64_t began = detail::global_timer_ns();
  Held held;
  if (s.mode == WaitMode::channel) {
    held.grant.emplace(s.ch.acquire(first_tag, tag_count, bytes, offset));
    held.data = held.grant->data();
    s.stamps.wait(warp, began, detail::global_timer_ns());
    return held;
  }
  if (s.mode == WaitMode::naive) {
    s.stamps.wait(warp, began, block_waits_for_thread0([&] { spin_on_flags(s, block_first_tag, block_tag_count); }));
  } else {
    if (lane == 0) spin_on_flags(s, first_tag, tag_count);
    __syncwarp();
    s.stamps.wait(warp, began, detail::global_timer_ns());  // lane 0's, after its own spin
  }
  // Into device memory first: the kernels read each word several times. 16-byte loads where the
  // source allows them (scratch_bytes is a multiple of 16).
  std::byte* to = s.scratch + std::uint64_t{warp} * s.scratch_bytes;
  if (bytes % 16 == 0 && offset % 16 == 0) {
    const auto* from = reinterpret_cast<const uint4*>(s.pinned + offset);
    for (std::uint32_t i = lane; i < bytes / 16; i += 32) reinterpret_cast<uint4*>(to)[i] = from[i];
  } else {
    const auto* from = reinterpret_cast<const std::uint32_t*>(s.pinned + offset);
    for (std::uint32_t i = lane; i < bytes / 4; i += 32) reinterpret_cast<std::uint32_t*>(to)[i] = from[i];
  }
  __syncwarp();
  held.data = to;
  return held;
}

/// Warp-collective: the warp is done reading what meet() returned.
__device__ inline void finish(Held& held) {
  if (held.grant) held.grant->release();
  else __syncwarp();  // the scratch is rewritten by this warp's next meet
}

/// Independent work for the compute blocks: an integer hash chain per thread.
__device__ inline void independent_work(std::uint32_t iterations, std::uint32_t* out) {
  const std::uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  std::uint32_t x = thread + 1;
  for (std::uint32_t i = 0; i < iterations; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
  out[thread] = x;
}

/// What every workload kernel gets besides its own data.
struct Launch {
  Source source;
  std::uint32_t consumer_blocks;  ///< blocks [0, consumer_blocks) consume; the rest compute
  std::uint32_t compute_iterations;
  std::uint32_t* compute_out;     ///< one word per thread of the grid
  bool consumers_only, compute_only;
};

// ---------------------------------------------------------------------------------------------
// Conjugate gradient, CPU and GPU alternating.

constexpr std::uint32_t cg_band = 4;  ///< A(i, j) != 0 only for |i - j| <= cg_band

/// A symmetric, strictly diagonally dominant (hence positive definite) banded matrix.
struct CgMatrix {
  std::uint32_t n;
  const double* diagonal;  ///< [n]
  const double* band;      ///< [cg_band][n]: band[(d - 1) * n + i] = A(i, i + d), 0 where i + d >= n
};

/// Row i of A times p, where window[j - lo] = p[j]; the same order of fused multiply-adds on the
/// host and the device, so both get the same bits.
__host__ __device__ inline double cg_row(const CgMatrix& a, std::uint32_t i, const double* window, std::uint32_t lo) {
  double sum = a.diagonal[i] * window[i - lo];
  for (std::uint32_t d = 1; d <= cg_band; ++d) {
    if (i >= d) sum = fma(a.band[std::uint64_t{d - 1} * a.n + i - d], window[i - d - lo], sum);
    if (i + d < a.n) sum = fma(a.band[std::uint64_t{d - 1} * a.n + i], window[i + d - lo], sum);
  }
  return sum;
}

/// Rows [first_row, first_row + rows) of consumer warp `warp` need p[lo, hi).
struct CgWindow {
  std::uint32_t lo, hi;
};
__host__ __device__ inline CgWindow cg_window(std::uint32_t n, std::uint32_t first_row, std::uint32_t rows) {
  return {first_row >= cg_band ? first_row - cg_band : 0u, first_row + rows + cg_band < n ? first_row + rows + cg_band : n};
}

struct CgKernel {
  CgMatrix a;
  std::uint32_t rows_per_warp, iterations;
  double* q;               ///< mapped pinned host memory (device address): A p of the current iteration
  std::uint32_t* arrived;  ///< device memory, [iterations]: consumer warps done with an iteration
  std::uint32_t* done;     ///< mapped pinned host memory, [iterations]: 1 once all of q is written
};

/// Producers' buffer: p of iteration k at k * n doubles, under tag k.
__global__ void __launch_bounds__(block_threads) cg_kernel(Launch l, CgKernel c) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool consumer = blockIdx.x < l.consumer_blocks;
  if (consumer && !l.compute_only) {
    const std::uint32_t warps = l.consumer_blocks * block_warps;
    const std::uint32_t first_row = warp * c.rows_per_warp;
    const CgWindow win = cg_window(c.a.n, first_row, c.rows_per_warp);
    for (std::uint32_t k = 0; k < c.iterations; ++k) {
      Held held = meet(l.source, warp, k, 1, k, 1, (win.hi - win.lo) * 8,
                       (std::uint64_t{k} * c.a.n + win.lo) * 8);
      const auto* p = reinterpret_cast<const double*>(held.data);
      for (std::uint32_t i = first_row + lane; i < first_row + c.rows_per_warp; i += 32)
        c.q[i] = cg_row(c.a, i, p, win.lo);
      finish(held);
      __syncwarp();  // every lane's q stores before lane 0's fence (cumulative)
      if (lane == 0) {
        __threadfence_system();  // this warp's rows of q reach host memory before it counts itself
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> count(c.arrived[k]);
        if (count.fetch_add(1, cuda::std::memory_order_acq_rel) == warps - 1) {
          __threadfence_system();
          cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(c.done[k]).store(1u, cuda::std::memory_order_release);
        }
      }
    }
  } else if (!consumer && !l.consumers_only) {
    independent_work(l.compute_iterations, l.compute_out);
  }
  l.source.stamps.life(warp, started, consumer);
}

/// The CPU's half of an iteration, shared by the benchmark's producer and the reference: x, r,
/// p and r.r of the current iteration.
struct CgState {
  std::vector<double> x, r, p;
  double rr = 0;
};

inline CgState cg_start(const std::vector<double>& b) {
  CgState s{std::vector<double>(b.size(), 0.0), b, b, 0};
  for (const double v : b) s.rr += v * v;
  return s;
}

/// Given q = A p: x += alpha p, r -= alpha q, p = r + beta p.
inline void cg_update(CgState& s, const double* q) {
  double pq = 0;
  for (std::size_t i = 0; i < s.p.size(); ++i) pq += s.p[i] * q[i];
  const double alpha = s.rr / pq;
  double rr = 0;
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    s.x[i] += alpha * s.p[i];
    s.r[i] -= alpha * q[i];
    rr += s.r[i] * s.r[i];
  }
  const double beta = rr / s.rr;
  for (std::size_t i = 0; i < s.p.size(); ++i) s.p[i] = s.r[i] + beta * s.p[i];
  s.rr = rr;
}

/// Host matrix with fresh random entries from `seed`.
struct CgHostMatrix {
  std::vector<double> diagonal, band;
  [[nodiscard]] CgMatrix view() const {
    return {static_cast<std::uint32_t>(diagonal.size()), diagonal.data(), band.data()};
  }
};

inline CgHostMatrix cg_random_matrix(std::uint32_t n, std::uint64_t seed) {
  CgHostMatrix m{std::vector<double>(n, 1.0), std::vector<double>(std::uint64_t{cg_band} * n, 0.0)};
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  auto uniform = [&state] {  // in (0, 1]
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>((state >> 11) + 1) / 9007199254740992.0;
  };
  for (std::uint32_t d = 1; d <= cg_band; ++d)
    for (std::uint32_t i = 0; i + d < n; ++i) {
      const double v = -uniform();
      m.band[std::uint64_t{d - 1} * n + i] = v;
      m.diagonal[i] -= v;  // |row sum of off-diagonals| < diagonal: strictly dominant
      m.diagonal[i + d] -= v;
    }
  return m;
}

/// `iterations` CG steps on the host alone; returns x.
inline std::vector<double> cg_reference(const CgHostMatrix& m, const std::vector<double>& b, std::uint32_t iterations) {
  const CgMatrix a = m.view();
  CgState s = cg_start(b);
  std::vector<double> q(b.size());
  for (std::uint32_t k = 0; k < iterations; ++k) {
    for (std::uint32_t i = 0; i < a.n; ++i) q[i] = cg_row(a, i, s.p.data(), 0);
    cg_update(s, q.data());
  }
  return s.x;
}

/// Largest |x - reference| over the largest |reference| (0: identical).
inline double relative_error(const std::vector<double>& x, const std::vector<double>& reference) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    err = std::fmax(err, std::fabs(x[i] - reference[i]));
    scale = std::fmax(scale, std::fabs(reference[i]));
  }
  return scale > 0 ? err / scale : err;
}

// ---------------------------------------------------------------------------------------------
// 3D halo cube.

/// Faces of the cube, in tag order within an iteration.
enum HaloFace : std::uint32_t { face_zm = 0, face_xm = 1, face_xp = 2, face_ym = 3, face_yp = 4, face_zp = 5 };
constexpr std::uint32_t halo_faces = 6;

/// Producers' buffer per iteration k (uint32 words, from k * 6 side^2): the -z face
/// [y][x], then per plane z four rows (-x [y], +x [y], -y [x], +y [x]), then the +z face [y][x].
/// Plane z's consumer warp reads one contiguous window: its four rows, plus the -z face before
/// them (z = 0) or the +z face after them (z = side - 1). Tag 6k + f is face f of iteration k.
struct HaloLayout {
  std::uint32_t side;
  [[nodiscard]] __host__ __device__ std::uint64_t words_per_iteration() const {
    return std::uint64_t{halo_faces} * side * side;
  }
  [[nodiscard]] __host__ __device__ std::uint64_t rows(std::uint32_t k, std::uint32_t z) const {
    return k * words_per_iteration() + std::uint64_t{side} * side + std::uint64_t{4} * side * z;
  }
  [[nodiscard]] __host__ __device__ std::uint64_t face_word(std::uint32_t k, std::uint32_t face, std::uint32_t a,
                                                            std::uint32_t b) const {
    // face_zm / face_zp: a = y, b = x; side faces: a = z, b = y (x faces) or x (y faces)
    if (face == face_zm) return k * words_per_iteration() + std::uint64_t{a} * side + b;
    if (face == face_zp) return k * words_per_iteration() + std::uint64_t{5} * side * side + std::uint64_t{a} * side + b;
    return rows(k, a) + std::uint64_t{face - face_xm} * side + b;
  }
  struct Window {
    std::uint64_t first_word;
    std::uint32_t words, first_tag, tag_count;
  };
  [[nodiscard]] __host__ __device__ Window window(std::uint32_t k, std::uint32_t z) const {
    const std::uint32_t face = side * side, row_words = 4 * side;
    if (z == 0) return {k * words_per_iteration(), face + row_words, halo_faces * k + face_zm, face_yp + 1};
    if (z == side - 1) return {rows(k, z), row_words + face, halo_faces * k + face_xm, halo_faces - face_xm};
    return {rows(k, z), row_words, halo_faces * k + face_xm, face_yp - face_xm + 1};
  }
};

/// What the host produces: word `i` of face `face` at iteration k (random, never zero).
__host__ __device__ inline std::uint32_t halo_value(std::uint32_t k, std::uint32_t face, std::uint32_t i,
                                                    std::uint32_t salt) {
  std::uint64_t h = (std::uint64_t{k} * halo_faces + face) * 0x100000001b3ull + i + (std::uint64_t{salt} << 40);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return static_cast<std::uint32_t>(h) | 1u;
}

/// The 7-point update (integers: exact on both sides).
__host__ __device__ inline std::uint32_t halo_update(std::uint32_t c, std::uint32_t xm, std::uint32_t xp,
                                                     std::uint32_t ym, std::uint32_t yp, std::uint32_t zm,
                                                     std::uint32_t zp) {
  return (xm + xp + ym + yp + zm + zp) ^ (c * 0x9e3779b1u);
}

struct HaloKernel {
  std::uint32_t side, iterations;
  std::uint32_t* cells;     ///< device memory, [2][side^3]: iteration k reads cells[k % 2]
  std::uint32_t* progress;  ///< device memory, [side]: iterations plane z has finished
};

/// One consumer warp per plane z (consumer warps = side): waits for the planes next to it to
/// finish the previous iteration, meets its halo window, updates its plane into the other buffer.
__global__ void __launch_bounds__(block_threads) halo_kernel(Launch l, HaloKernel h) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool consumer = blockIdx.x < l.consumer_blocks;
  if (consumer && !l.compute_only) {
    const std::uint32_t s = h.side, z = warp;
    const std::uint64_t plane = std::uint64_t{s} * s, cube = plane * s;
    const HaloLayout layout{s};
    for (std::uint32_t k = 0; k < h.iterations; ++k) {
      // The neighbours finished iteration k - 1: their planes of cells[k % 2] are written, and
      // they no longer read cells[(k + 1) % 2], which this iteration overwrites.
      if (lane == 0) {
        auto wait_for = [&](std::uint32_t n) {
          while (cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(h.progress[n]).load(
                     cuda::std::memory_order_acquire) < k)
            __nanosleep(64);
        };
        if (z > 0) wait_for(z - 1);
        if (z + 1 < s) wait_for(z + 1);
      }
      __syncwarp();
      const HaloLayout::Window w = layout.window(k, z);
      Held held = meet(l.source, warp, halo_faces * k, halo_faces, w.first_tag, w.tag_count, w.words * 4,
                       w.first_word * 4);
      const auto* win = reinterpret_cast<const std::uint32_t*>(held.data);
      const std::uint32_t* rows = z == 0 ? win + plane : win;  // -x, +x (by y), -y, +y (by x)
      const std::uint32_t* zm_face = z == 0 ? win : nullptr;
      const std::uint32_t* zp_face = z == s - 1 ? win + 4 * s : nullptr;
      const std::uint32_t* cur = h.cells + (k % 2) * cube;
      std::uint32_t* next = h.cells + ((k + 1) % 2) * cube;
      for (std::uint32_t i = lane; i < plane; i += 32) {
        const std::uint32_t y = i / s, x = i % s;
        const std::uint64_t at = z * plane + i;
        // L2 loads: neighbour planes were written by other SMs
        const std::uint32_t c = __ldcg(cur + at);
        const std::uint32_t xm = x > 0 ? __ldcg(cur + at - 1) : rows[y];
        const std::uint32_t xp = x + 1 < s ? __ldcg(cur + at + 1) : rows[s + y];
        const std::uint32_t ym = y > 0 ? __ldcg(cur + at - s) : rows[2 * s + x];
        const std::uint32_t yp = y + 1 < s ? __ldcg(cur + at + s) : rows[3 * s + x];
        const std::uint32_t zm = z > 0 ? __ldcg(cur + at - plane) : zm_face[i];
        const std::uint32_t zp = z + 1 < s ? __ldcg(cur + at + plane) : zp_face[i];
        next[at] = halo_update(c, xm, xp, ym, yp, zm, zp);
      }
      finish(held);
      __syncwarp();  // every lane's stores of the plane before lane 0's release (cumulative)
      if (lane == 0)
        cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(h.progress[z]).store(k + 1,
                                                                                         cuda::std::memory_order_release);
    }
  } else if (!consumer && !l.consumers_only) {
    independent_work(l.compute_iterations, l.compute_out);
  }
  l.source.stamps.life(warp, started, consumer);
}

/// Writes face `face` of iteration k into the producers' buffer (uint32 words).
inline void halo_write_face(std::uint32_t* buffer, std::uint32_t side, std::uint32_t k, std::uint32_t face,
                            std::uint32_t salt) {
  const HaloLayout layout{side};
  for (std::uint32_t a = 0; a < side; ++a)
    for (std::uint32_t b = 0; b < side; ++b) buffer[layout.face_word(k, face, a, b)] = halo_value(k, face, a * side + b, salt);
}

/// `iterations` stencil steps on the host from `cells` (side^3 words); returns the last cube.
inline std::vector<std::uint32_t> halo_reference(std::vector<std::uint32_t> cells, std::uint32_t side,
                                                 std::uint32_t iterations, std::uint32_t salt) {
  const std::uint64_t s = side, plane = s * s;
  std::vector<std::uint32_t> next(cells.size());
  for (std::uint32_t k = 0; k < iterations; ++k) {
    for (std::uint64_t z = 0; z < s; ++z)
      for (std::uint64_t y = 0; y < s; ++y)
        for (std::uint64_t x = 0; x < s; ++x) {
          const std::uint64_t at = z * plane + y * s + x;
          const auto zy = static_cast<std::uint32_t>(z * s + y), zx = static_cast<std::uint32_t>(z * s + x);
          const auto yx = static_cast<std::uint32_t>(y * s + x);
          next[at] = halo_update(cells[at], x > 0 ? cells[at - 1] : halo_value(k, face_xm, zy, salt),
                                 x + 1 < s ? cells[at + 1] : halo_value(k, face_xp, zy, salt),
                                 y > 0 ? cells[at - s] : halo_value(k, face_ym, zx, salt),
                                 y + 1 < s ? cells[at + s] : halo_value(k, face_yp, zx, salt),
                                 z > 0 ? cells[at - plane] : halo_value(k, face_zm, yx, salt),
                                 z + 1 < s ? cells[at + plane] : halo_value(k, face_zp, yx, salt));
        }
    cells.swap(next);
  }
  return cells;
}

// ---------------------------------------------------------------------------------------------
// GPU to GPU (stencil2gpu, kmeans2gpu): each GPU runs one persistent kernel; every iteration one
// block of each GPU (the exchange block) produces data for the other GPU and meets the other's.

/// Device-side waits of the GPU-to-GPU kernels give up after this long (a publish that never
/// comes, a peer kernel that failed): a message and a trap instead of a hang.
constexpr std::uint64_t peer_watchdog_ns = 10'000'000'000ull;

/// Gives up (message, trap) once a wait that began at `since` passed the watchdog.
__device__ inline void peer_watchdog(const char* workload, std::uint64_t since, const char* what, std::uint32_t k) {
  if (detail::global_timer_ns() - since < peer_watchdog_ns) return;
  printf("%s: block %u waited %llu s for %s (iteration %u); giving up\n", workload, blockIdx.x,
         static_cast<unsigned long long>(peer_watchdog_ns / 1000000000ull), what, k);
  __trap();
}

/// One thread: waits until `word`, which other blocks of this GPU (or, at system scope, the other
/// GPU) count up with release stores, reaches `target` (acquire loads, `__nanosleep(64)` between
/// them); gives up at the watchdog, naming `what` and step `k` of `workload`.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
__device__ inline void wait_at_least(std::uint32_t& word, std::uint32_t target, const char* workload, const char* what,
                                     std::uint32_t k) {
  const std::uint64_t since = detail::global_timer_ns();
  cuda::atomic_ref<std::uint32_t, Scope> counted(word);
  for (std::uint32_t polls = 1; counted.load(cuda::std::memory_order_acquire) < target; ++polls) {
    __nanosleep(64);
    if (polls % 1024 == 0) peer_watchdog(workload, since, what, k);
  }
}

/// Block-collective: thread 0 waits as wait_at_least while the block waits at a barrier
/// (block_waits_for_thread0); every warp stamps the wait in the row of its global warp index.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
__device__ inline void block_waits_at_least(std::uint32_t& word, std::uint32_t target, const Stamps& stamps,
                                            const char* workload, const char* what, std::uint32_t k) {
  const std::uint64_t began = detail::global_timer_ns();
  const std::uint64_t arrived = block_waits_for_thread0([&] { wait_at_least<Scope>(word, target, workload, what, k); });
  stamps.wait(blockIdx.x * block_warps + threadIdx.x / 32, began, arrived);
}

/// Block-collective: the next entry of the task queue whose head is `*head` (thread 0 takes it
/// for the block).
__device__ inline std::uint32_t block_takes_task(std::uint32_t* head) {
  __shared__ std::uint32_t taken;
  if (threadIdx.x == 0) taken = atomicAdd(head, 1u);
  __syncthreads();
  const std::uint32_t q = taken;
  __syncthreads();  // every thread has read it before thread 0 takes the next
  return q;
}

/// How a GPU-to-GPU kernel hands the data of each step to the other GPU and learns that the
/// other's is there. Channel modes: one tag per step. Baselines: the producer stores its data into
/// the consumer's memory (its mailbox), then the count of steps sent so far into `published`.
struct PeerExchange {
  WaitMode mode;                  ///< channel, channel_direct, peer_flag, naive or atomic_wait
  channel_handle from_neighbour;  ///< this GPU's channel
  channel_producer to_neighbour;  ///< the neighbour's channel (its buffer: this GPU's memory for channel; for channel_direct the neighbour's by default)
  std::uint32_t* published;            ///< this GPU's memory; naive: managed memory
  std::uint32_t* neighbour_published;  ///< the neighbour's `published`
  unsigned* blocks_done;               ///< channel_warp: this GPU's blocks that ended (its monitor warp stops at all)
};

/// Block-collective, the last thing every block of a GPU-to-GPU kernel does: in channel_warp
/// mode, counts the block off, after all its warps' acquires.
__device__ inline void peer_block_done(const PeerExchange& x) {
  if (x.mode != WaitMode::channel_warp) return;
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(x.blocks_done, 1u);
}

/// channel_warp: the monitor warp of one GPU's channel (one block of 32 threads, on a stream of
/// its own), until `*finished` reaches `target` (the bench: the blocks of that GPU's workload
/// kernel that ended; the tests: consumer warps); its lists in the block's dynamic shared memory
/// when `lists_in_shared` (launched with channel::monitor_scratch_bytes).
__global__ void pair_monitor_kernel(channel_handle ch, const unsigned* finished, unsigned target, bool lists_in_shared) {
  extern __shared__ uint4 monitor_scratch[];
  ch.monitor(
      [&] {
        return cuda::atomic_ref<const unsigned, cuda::thread_scope_device>(*finished)
                   .load(cuda::std::memory_order_relaxed) >= target;
      },
      lists_in_shared ? monitor_scratch : nullptr);
}

/// One thread: waits until the neighbour has announced `count` steps (acquire, system scope: the
/// neighbour's release store follows its data's peer stores).
__device__ inline void peer_wait_published(const PeerExchange& x, const char* workload, std::uint32_t count,
                                           std::uint32_t k) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system> published(*x.published);
  const std::uint64_t since = detail::global_timer_ns();
  if (x.mode == WaitMode::atomic_wait) {
    // libcu++'s wait returns once the word differs from `seen` (docs/channels.md: a backoff loop)
    for (std::uint32_t seen = published.load(cuda::std::memory_order_acquire); seen < count;
         seen = published.load(cuda::std::memory_order_acquire))
      published.wait(seen, cuda::std::memory_order_acquire);
    return;
  }
  for (std::uint32_t polls = 1;; ++polls) {
    // naive: Algorithm 1 polls with atomicAdd(&flag, 0) on managed memory (an acquire RMW here,
    // so that the data's stores are visible after it)
    const std::uint32_t seen = x.mode == WaitMode::naive ? published.fetch_add(0u, cuda::std::memory_order_acquire)
                                                         : published.load(cuda::std::memory_order_acquire);
    if (seen >= count) return;
    if (polls % 1024 == 0) peer_watchdog(workload, since, "the other GPU's data", k);
  }
}

/// Thread 0 of the exchange block, after a __syncthreads that follows every store of step
/// `state`'s data: announces it (release at system scope, cumulative over the block's stores).
__device__ inline void peer_announce(const PeerExchange& x, std::uint32_t state) {
  if (uses_channel(x.mode)) {
    if (!x.to_neighbour.publish(state, 1)) __trap();  // tags are the steps: cannot be past the last
  } else {
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(*x.neighbour_published)
        .store(state + 1, cuda::std::memory_order_release);
  }
}

/// What a warp of the exchange block got from the other GPU, readable until release().
struct PeerWindow {
  const std::byte* data = nullptr;
  cuda::std::optional<channel_data> grant;  ///< channel modes

  /// Word i of the window: the channel's data (staging, or the neighbour's buffer in place) with
  /// plain loads; the mailbox, rewritten by the peer while the kernel runs, from L2.
  template <class T>
  __device__ T load(std::uint32_t i) const {
    const T* at = reinterpret_cast<const T*>(data) + i;
    return grant ? *at : __ldcg(at);
  }
  /// Warp-collective: done reading.
  __device__ void release() const {
    if (grant) grant->release();
  }
};

/// Every warp of the exchange block (naive mode: block-collective): waits for the other GPU's data
/// of step `state` and returns this warp's window of it, `bytes` from `channel_offset` of the
/// channel's buffer (channel modes) or `mailbox` (baselines). Stamps the wait in `stamp_row`.
__device__ inline PeerWindow peer_meet(const PeerExchange& x, const char* workload, std::uint32_t state,
                                       std::uint32_t bytes, std::uint64_t channel_offset, const void* mailbox,
                                       const Stamps& stamps, std::uint32_t stamp_row) {
  // The warp's lanes together: a caller may come here straight from a branch that only some of
  // them took (kmeans2gpu: thread 0's publish), and acquire is collective over the lanes active
  // at the call, so a warp still diverged would acquire twice, as two groups (docs/channels.md,
  // kmeans2gpu).
  __syncwarp();
  const std::uint64_t began = detail::global_timer_ns();
  PeerWindow window;
  std::uint64_t arrived = 0;  // only lane 0's is recorded
  if (uses_channel(x.mode)) {  // channel_direct: the window in place, in the buffer's GPU
    window.grant.emplace(x.from_neighbour.acquire(state, 1, bytes, channel_offset));
    window.data = window.grant->data();
    arrived = detail::global_timer_ns();
  } else if (x.mode == WaitMode::naive) {  // Algorithm 1: the block waits, thread 0 polls
    window.data = static_cast<const std::byte*>(mailbox);
    arrived = block_waits_for_thread0([&] { peer_wait_published(x, workload, state + 1, state); });
  } else {
    window.data = static_cast<const std::byte*>(mailbox);
    if (threadIdx.x % 32 == 0) peer_wait_published(x, workload, state + 1, state);
    __syncwarp();
    arrived = detail::global_timer_ns();  // lane 0's, after its own wait
  }
  stamps.wait(stamp_row, began, arrived);
  return window;
}

// ---------------------------------------------------------------------------------------------
// 2D stencil across two GPUs (GPU to GPU).

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

// ---------------------------------------------------------------------------------------------
// k-means across two GPUs (GPU to GPU).

/// A point is one uint4: four coordinates in [0, kmeans_coordinate_limit). Squared distances
/// (at most 4 x 1023^2) fit in 32 bits and every sum of coordinates in 64, so the arithmetic
/// is exact and the host reference gets the same centroids.
constexpr std::uint32_t kmeans_dims = 4;
constexpr std::uint32_t kmeans_coordinate_limit = 1024;
/// Per centroid: the sum of each coordinate of its points, then their count.
constexpr std::uint32_t kmeans_words_per_centroid = kmeans_dims + 1;

__host__ __device__ inline std::uint32_t kmeans_distance(uint4 a, uint4 b) {
  const int dx = static_cast<int>(a.x) - static_cast<int>(b.x), dy = static_cast<int>(a.y) - static_cast<int>(b.y);
  const int dz = static_cast<int>(a.z) - static_cast<int>(b.z), dw = static_cast<int>(a.w) - static_cast<int>(b.w);
  return static_cast<std::uint32_t>(dx * dx + dy * dy + dz * dz + dw * dw);
}

/// The nearest of `k` centroids to `p` (squared Euclidean distance; a tie goes to the lower index).
__host__ __device__ inline std::uint32_t kmeans_nearest(uint4 p, const uint4* centroids, std::uint32_t k) {
  std::uint32_t best = 0, best_distance = kmeans_distance(p, centroids[0]);
  for (std::uint32_t c = 1; c < k; ++c) {
    const std::uint32_t d = kmeans_distance(p, centroids[c]);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

/// One coordinate of a centroid after an iteration: the floor of its points' mean, or `old` when
/// no point chose it.
__host__ __device__ inline std::uint32_t kmeans_mean(unsigned long long sum, unsigned long long count, std::uint32_t old) {
  return count == 0 ? old : static_cast<std::uint32_t>(sum / count);
}

/// One GPU's half of the points: GPU 0 the first, GPU 1 the second; k centroids, the same on both
/// GPUs, state 0 = the first k points. Per iteration i every block assigns its points (a grid
/// stride) to the nearest centroid of state i, sums them per centroid in shared memory and adds
/// those into partial[i]. Block 0 (the exchange block) sends partial[i] to the other GPU, meets
/// the other's, each of its warps for k / 8 whole centroids, adds the two into totals[i], writes
/// state i + 1 and tells the other blocks (`ready`).
struct Kmeans2Gpu {
  PeerExchange exchange;
  std::uint32_t k, iterations;
  std::uint64_t points;                  ///< this GPU's
  const uint4* point_data;               ///< this GPU's points
  unsigned long long* partial;           ///< [iterations][k][5]: this GPU's sums and counts, zero before the run
  unsigned long long* totals;            ///< [iterations][k][5]: both GPUs'
  std::uint32_t* centroids;              ///< [iterations + 1][k][4]: state 0 from the host
  std::uint32_t* arrived;                ///< blocks done adding into partial, over all iterations
  std::uint32_t* ready;                  ///< the newest state in `centroids`
  // channel, channel_direct: partial[i] at i * k * 5 words of the neighbour's channel's buffer,
  // tag i. peer_flag, naive, atomic_wait: the neighbour stores its partial[i] into mailbox[i]
  // (a slot per iteration: never overwritten), then i + 1 into exchange.published
  const unsigned long long* mailbox;     ///< this GPU, [iterations][k][5]
  unsigned long long* neighbour_mailbox; ///< the neighbour's `mailbox` (a peer address)
  /// Lives and waits by global warp: the exchange block's for the other GPU's partial sums, the
  /// other blocks' for the next state (so that their waiting does not count as work that hides
  /// the exchange: docs/channels.md, kmeans2gpu)
  Stamps stamps;
};

/// The exchange block in iteration i, after every thread's arrival: sends, meets, adds and writes
/// state i + 1 (the block's shared `centroid` still holds state i), then sets `ready`.
__device__ inline void kmeans_exchange(const Kmeans2Gpu& m, std::uint32_t i, const uint4* centroid) {
  const std::uint32_t words = m.k * kmeans_words_per_centroid, slice = words / block_warps;
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t row = std::uint64_t{i} * words;
  if (threadIdx.x == 0) {  // every block of this GPU added its sums of iteration i
    const std::uint64_t since = detail::global_timer_ns();
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device> arrived(*m.arrived);
    for (std::uint32_t polls = 1; arrived.load(cuda::std::memory_order_acquire) < (i + 1) * gridDim.x; ++polls)
      if (polls % 1024 == 0) peer_watchdog("kmeans2gpu", since, "the blocks of its GPU", i);
  }
  __syncthreads();
  const unsigned long long* partial = m.partial + row;  // L2 loads: the other blocks' atomics
  for (std::uint32_t w = threadIdx.x; w < words; w += block_threads) {
    const unsigned long long v = __ldcg(partial + w);
    if (uses_channel(m.exchange.mode)) reinterpret_cast<unsigned long long*>(m.exchange.to_neighbour.buffer())[row + w] = v;
    else m.neighbour_mailbox[row + w] = v;
  }
  __syncthreads();  // every word sent before thread 0's release
  if (threadIdx.x == 0) peer_announce(m.exchange, i);
  const std::uint32_t first = warp_in_block * slice;  // the warp's words: k / 8 whole centroids
  const PeerWindow other = peer_meet(m.exchange, "kmeans2gpu", i, slice * 8, (row + first) * 8, m.mailbox + row + first,
                                     m.stamps, blockIdx.x * block_warps + warp_in_block);
  unsigned long long* totals = m.totals + row;
  for (std::uint32_t w = lane; w < slice; w += 32)
    totals[first + w] = __ldcg(partial + first + w) + other.load<unsigned long long>(w);
  other.release();
  __syncwarp();  // the warp's totals before its lanes read each other's
  const std::uint32_t first_centroid = first / kmeans_words_per_centroid;
  const auto* old = reinterpret_cast<const std::uint32_t*>(centroid);
  std::uint32_t* next = m.centroids + (std::uint64_t{i} + 1) * m.k * kmeans_dims;
  for (std::uint32_t j = lane; j < slice / kmeans_words_per_centroid * kmeans_dims; j += 32) {
    const std::uint32_t c = first_centroid + j / kmeans_dims, d = j % kmeans_dims;
    const unsigned long long* sums = totals + std::uint64_t{c} * kmeans_words_per_centroid;
    next[c * kmeans_dims + d] = kmeans_mean(sums[d], sums[kmeans_dims], old[c * kmeans_dims + d]);
  }
  __syncthreads();  // every warp's centroids before thread 0's release (cumulative)
  if (threadIdx.x == 0)
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(*m.ready).store(i + 1, cuda::std::memory_order_release);
}

/// Persistent: every block must be resident at once (the exchange block waits for all of them,
/// they wait for it). Dynamic shared memory: k uint4 centroids, then k x 5 uint32 sums (a block's
/// points, at most 2^32 / 1023 of them: the bench checks).
__global__ void __launch_bounds__(block_threads) kmeans2gpu_kernel(Kmeans2Gpu m) {
  extern __shared__ uint4 kmeans_shared[];
  uint4* centroid = kmeans_shared;
  auto* sums = reinterpret_cast<std::uint32_t*>(kmeans_shared + m.k);
  const std::uint32_t words = m.k * kmeans_words_per_centroid;
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32;
  const bool exchange_block = blockIdx.x == 0;
  const std::uint64_t started = detail::global_timer_ns();
  auto load_centroids = [&](std::uint32_t state) {  // L2 loads: written by the exchange block
    const uint4* from = reinterpret_cast<const uint4*>(m.centroids) + std::uint64_t{state} * m.k;
    for (std::uint32_t c = threadIdx.x; c < m.k; c += block_threads) centroid[c] = __ldcg(from + c);
  };
  load_centroids(0);
  for (std::uint32_t i = 0; i < m.iterations; ++i) {
    for (std::uint32_t w = threadIdx.x; w < words; w += block_threads) sums[w] = 0;
    __syncthreads();  // the centroids loaded, the sums cleared
    const std::uint64_t stride = std::uint64_t{gridDim.x} * block_threads;
    for (std::uint64_t p = std::uint64_t{blockIdx.x} * block_threads + threadIdx.x; p < m.points; p += stride) {
      const uint4 point = m.point_data[p];
      std::uint32_t* to = sums + kmeans_nearest(point, centroid, m.k) * kmeans_words_per_centroid;
      atomicAdd(to, point.x);
      atomicAdd(to + 1, point.y);
      atomicAdd(to + 2, point.z);
      atomicAdd(to + 3, point.w);
      atomicAdd(to + 4, 1u);
    }
    __syncthreads();
    unsigned long long* partial = m.partial + std::uint64_t{i} * words;
    for (std::uint32_t w = threadIdx.x; w < words; w += block_threads)
      if (sums[w] != 0) atomicAdd(partial + w, static_cast<unsigned long long>(sums[w]));
    __syncthreads();  // the block's additions before thread 0's release (cumulative)
    if (threadIdx.x == 0)
      cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(*m.arrived).fetch_add(1u, cuda::std::memory_order_release);
    if (exchange_block) {
      kmeans_exchange(m, i, centroid);
    } else {
      block_waits_at_least<cuda::thread_scope_device>(*m.ready, i + 1, m.stamps, "kmeans2gpu", "the next centroids", i);
    }
    load_centroids(i + 1);
  }
  m.stamps.life(warp, started, exchange_block);
  peer_block_done(m.exchange);
}

}  // namespace warpvm::workloads
