#pragma once
// The CPU-to-GPU workloads of warpvm-channel-bench, their kernels and host references (cg and
// halo also checked at small sizes by tests/workloads/channel_workloads_test.cu):
//
//   tiles a host thread publishes image tiles one after another; consumer warps blur each tile
//         (3x3 box sum) into device memory
//   cg    conjugate gradient with the CPU and the GPU alternating inside one persistent kernel:
//         every iteration the GPU computes q = A p (a symmetric banded matrix, one window of p
//         per consumer warp) and hands q back through mapped pinned memory; the CPU does the dot
//         products and vector updates and publishes the next direction p
//   halo  a 3D cube of side^3 cells updated by a 7-point stencil, one z-plane per consumer warp;
//         every iteration the host produces the six face halos (six tags, six publishes) that
//         the boundary cells read
//
// Consumer warps meet the host's data one of four ways (WaitMode, wait_modes.cuh); compute blocks
// run independent work beside them. Host references: cg_reference and halo_reference (same
// arithmetic, fused multiply-adds on both sides, integers for the stencil); the tiles' blur is
// checked against the one its workload class computes (Tiles, cpu_workloads.cuh).

#include "warpvm/workloads/channel/wait_modes.cuh"

#include <cuda/atomic>

#include <cmath>
#include <cstdint>
#include <vector>

namespace warpvm::workloads {

// ---------------------------------------------------------------------------------------------
// Image tiles, streamed from the host.

struct TilesKernel {
  std::uint32_t* out;  ///< blurred tiles
  std::uint32_t tiles, side, consumer_warps;
};

/// 3x3 box sum with clamped borders, threads first, first + stride, ... over the pixels.
__device__ inline void blur(const std::uint32_t* tile, std::uint32_t* out, std::uint32_t side, std::uint32_t first,
                            std::uint32_t stride) {
  for (std::uint32_t p = first; p < side * side; p += stride) {
    const int y = static_cast<int>(p / side), x = static_cast<int>(p % side), s = static_cast<int>(side);
    std::uint32_t sum = 0;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int yy = min(max(y + dy, 0), s - 1), xx = min(max(x + dx, 0), s - 1);
        sum += tile[yy * s + xx];
      }
    out[p] = sum;
  }
}

/// Producers' buffer: tile t at t x side^2 words, under tag t.
__global__ void __launch_bounds__(block_threads) tiles_kernel(Launch l, TilesKernel t) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool consumer = blockIdx.x < l.consumer_blocks;
  const std::uint32_t pixels = t.side * t.side, bytes = pixels * 4;
  const Source& s = l.source;
  if (consumer && !l.compute_only) {
    if (s.mode == WaitMode::naive) {  // Algorithm 1: the block is the consumer of a tile
      // the block's warps' scratch, of which it uses the first tile
      auto* scratch = reinterpret_cast<std::uint32_t*>(s.scratch + std::uint64_t{blockIdx.x} * block_warps * s.scratch_bytes);
      for (std::uint32_t tile = blockIdx.x; tile < t.tiles; tile += l.consumer_blocks) {
        const std::uint64_t t0 = detail::global_timer_ns();
        // Its leading barrier also keeps the block's blur of the previous tile before this copy
        // into the same scratch.
        s.stamps.wait(warp, t0, block_waits_for_thread0([&] { spin_on_flags(s, tile, 1); }));
        const auto* from = reinterpret_cast<const uint4*>(s.pinned + std::uint64_t{tile} * bytes);
        for (std::uint32_t i = threadIdx.x; i < pixels / 4; i += block_threads) reinterpret_cast<uint4*>(scratch)[i] = from[i];
        __syncthreads();
        blur(scratch, t.out + std::uint64_t{tile} * pixels, t.side, threadIdx.x, block_threads);
      }
    } else {
      for (std::uint32_t tile = warp; warp < t.consumer_warps && tile < t.tiles; tile += t.consumer_warps) {
        Held held = meet(s, warp, tile, 1, tile, 1, bytes, std::uint64_t{tile} * bytes);
        blur(reinterpret_cast<const std::uint32_t*>(held.data), t.out + std::uint64_t{tile} * pixels, t.side, lane, 32);
        finish(held);
      }
    }
  } else if (!consumer && !l.consumers_only) {
    independent_work(l.compute_iterations, l.compute_out);
  }
  s.stamps.life(warp, started, consumer);
}

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

}  // namespace warpvm::workloads
