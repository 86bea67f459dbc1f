// warpvm-placement-bench: issue #6's workloads on N GPUs of one MultiGpuSpace under each page
// policy (on_touch, access_counter, duplication, oasis) and the ideal bound (every GPU works on
// its own device copy of every object: all accesses local, no coherence, not a correct program
// where GPUs read each other's writes, so its records are never "verified"; bfs's ideal keeps
// one depth array, on the first GPU, that the others update with peer atomics: on separate
// copies no GPU would see the vertices the others claim, and the frontier needs them). Data starts on the
// host (drop_cached() before every run; --initial-placement places it on the GPUs, untimed); every warpvm result is checked against the same kernel
// run on one GPU over plain device memory (exit status 1 if any differs; the reference itself is
// checked against a host computation for stencil2d, bfs, im2col and fft, and at samples for conv2d and gemm).
// The real-UVM modes (uvm, uvm_read_mostly, uvm_accessed_by; in core only) run the reference's
// kernels on every GPU over one cudaMallocManaged copy of each object, written on the host before
// every run: coherent programs, checked like the paged modes. --cache-fraction F < 1 runs the
// paged modes oversubscribed (issue #6's cache = 2/3 of the footprint): each GPU's frame pool is
// F x the footprint, pages are evicted (dirty ones written back) and every result is still
// checked against the reference; ideal and the uvm modes ignore it (uvm stays in core). JSON
// Lines out (docs/benchmarks.md; records carry cache_fraction, evictions and writebacks),
// progress on stderr.
//
// transpose_flat is transpose with the paged modes' element accesses by flat address (flat_view,
// the shadow map of OASIS-InMem), to price the lookup against the handles.
//
//   warpvm-placement-bench --gpus 2 --bytes 1GiB --repeats 3 [--workloads transpose,stencil2d,gemm,pagerank,im2col,conv2d,bfs,fft,transpose_flat]
//                          [--modes on_touch,access_counter,duplication,oasis,ideal,uvm,uvm_read_mostly,uvm_accessed_by]
//                          [--cache-fraction 0.667] [--initial-placement blocks] [--out f.jsonl]

#include "harness.cuh"
#include "cli.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <chrono>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

/// Plain device or managed memory with the shared_array interface: the reference, the ideal mode
/// and the uvm modes.
template <class T>
struct Raw {
  using value_type = T;
  T* data;
  std::uint64_t n;
  unsigned g, G;
  __device__ T load(std::uint64_t i) const { return data[i]; }
  __device__ void store(std::uint64_t i, const T& v) const { data[i] = v; }
  /// System scope: bfs's ideal run updates the first GPU's copy from every GPU, the uvm runs
  /// their one managed copy.
  __device__ bool compare_exchange(std::uint64_t i, T& expected, T desired) const {
    return cuda::atomic_ref<T, cuda::thread_scope_system>(data[i]).compare_exchange_strong(expected, desired,
                                                                                          cuda::std::memory_order_relaxed);
  }
  __device__ unsigned gpu() const { return g; }
  __device__ unsigned gpus() const { return G; }
  __host__ __device__ std::uint64_t size() const { return n; }
  /// Device memory has no pages: one "page" spans any run.
  __device__ std::uint64_t elements_per_page() const { return std::uint64_t{1} << 62; }
  template <access A, class F>
  __device__ void with_span(std::uint64_t i, std::uint32_t, F&& f) const {
    f(data + i);
  }
};

__device__ std::uint64_t tid() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }
__device__ std::uint64_t nthreads() { return std::uint64_t{gridDim.x} * blockDim.x; }

// ---- transpose: out (cols x rows) = in (rows x cols)^T, both multiples of 32; 32 x 32 tiles ----
// through shared memory, tile rows of `out` dealt to the GPUs round-robin. A pure move: the tile
// holds the arrays' own element type, so no element is converted on the way.
template <class Array>
__device__ void transpose_tiles(Array in, Array out, std::uint64_t rows, std::uint64_t cols) {
  __shared__ typename Array::value_type tile[32][33];
  const std::uint64_t out_tile_rows = cols / 32, out_tile_cols = rows / 32;
  for (std::uint64_t t = blockIdx.x; t < out_tile_rows * out_tile_cols; t += gridDim.x) {
    const std::uint64_t ti = t / out_tile_cols, tj = t % out_tile_cols;
    if (ti % out.gpus() != out.gpu()) continue;
    for (unsigned y = threadIdx.y; y < 32; y += blockDim.y) tile[y][threadIdx.x] = in.load((tj * 32 + y) * cols + ti * 32 + threadIdx.x);
    __syncthreads();
    for (unsigned y = threadIdx.y; y < 32; y += blockDim.y) out.store((ti * 32 + y) * rows + tj * 32 + threadIdx.x, tile[threadIdx.x][y]);
    __syncthreads();
  }
}

template <class Array>
__global__ void transpose_kernel(Array in, Array out, std::uint64_t rows, std::uint64_t cols) {
  transpose_tiles(in, out, rows, cols);
}

/// An object reached by flat address (flat_view: a shadow-map lookup per access, then the
/// object's own page tables), with the element interface transpose_tiles uses.
template <class T>
struct Flat {
  using value_type = T;
  flat_view flat;
  flat_address base;
  __device__ T load(std::uint64_t i) const { return flat.load<T>(base + i * sizeof(T)); }
  __device__ void store(std::uint64_t i, const T& v) const { flat.store<T>(base + i * sizeof(T), v); }
  __device__ unsigned gpu() const { return flat.gpu(); }
  __device__ unsigned gpus() const { return flat.gpus(); }
};

/// transpose_flat: the transpose with every element access by flat address (OASIS-InMem's
/// raw pointers), to price the shadow map against the handles' transpose_kernel.
__global__ void transpose_flat_kernel(flat_view flat, flat_address in, flat_address out, std::uint64_t rows,
                                      std::uint64_t cols) {
  transpose_tiles(Flat<std::uint32_t>{flat, in}, Flat<std::uint32_t>{flat, out}, rows, cols);
}

// ---- 2D stencil: sweeps inside one kernel, grids swapped, a barrier across every GPU's blocks ----
__device__ void grid_barrier(unsigned* counter, unsigned total_blocks, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_system> c(*counter);
    c.fetch_add(1, cuda::std::memory_order_acq_rel);
    while (c.load(cuda::std::memory_order_acquire) < total_blocks * (round + 1)) __nanosleep(256);
  }
  __syncthreads();
}

/// Elements a warp works on at a time in stencil2d, im2col and fft: it stages what they read in
/// shared memory, a page's piece of each run under one hold, and writes them a page's piece at a
/// time, instead of taking a hold per element access.
constexpr unsigned warp_chunk = 256;
constexpr unsigned chunk_block_warps = 8;  ///< warps per block of the chunked kernels

/// f(at, piece) for the pieces [at, at + piece) of elements [first, end) that lie in one page
/// each (`per_page` elements a page), in order: what one hold (with_span) can cover.
template <class F>
__device__ void for_each_page_piece(std::uint64_t per_page, std::uint64_t first, std::uint64_t end, F&& f) {
  for (std::uint64_t at = first; at < end;) {
    const std::uint64_t page_end = (at / per_page + 1) * per_page;
    const auto piece = static_cast<std::uint32_t>((end < page_end ? end : page_end) - at);
    f(at, piece);
    at += piece;
  }
}

/// The warp copies elements [first, first + count) of `array` to `to`, one span (one hold) per
/// page the run touches.
template <class Array>
__device__ void warp_read_run(const Array& array, std::uint64_t first, std::uint32_t count, typename Array::value_type* to) {
  for_each_page_piece(array.elements_per_page(), first, first + count, [&](std::uint64_t at, std::uint32_t piece) {
    array.template with_span<access::read>(at, piece, [&](const typename Array::value_type* data) {
      for (unsigned j = threadIdx.x % 32; j < piece; j += 32) to[at - first + j] = data[j];
    });
  });
}

/// The warp writes `from` into elements [first, first + count) of `array`, one span per page.
template <class Array>
__device__ void warp_write_run(const Array& array, std::uint64_t first, std::uint32_t count,
                               const typename Array::value_type* from) {
  for_each_page_piece(array.elements_per_page(), first, first + count, [&](std::uint64_t at, std::uint32_t piece) {
    array.template with_span<access::read_write>(at, piece, [&](typename Array::value_type* data) {
      for (unsigned j = threadIdx.x % 32; j < piece; j += 32) data[j] = from[at - first + j];
    });
  });
}

/// Each GPU updates its rows' cells, a warp per chunk of warp_chunk consecutive cells.
template <class Grid>
__global__ void __launch_bounds__(chunk_block_warps * 32)
    stencil_kernel(Grid a, Grid b, std::uint64_t n, unsigned sweeps, unsigned* barrier, unsigned total_blocks) {
  // Per warp: the row above, the chunk's own row with one cell each side, the row below, the result.
  __shared__ std::uint32_t above[chunk_block_warps][warp_chunk], middle[chunk_block_warps][warp_chunk + 2],
      below[chunk_block_warps][warp_chunk], result[chunk_block_warps][warp_chunk];
  const unsigned w = threadIdx.x / 32;
  const std::uint64_t cells = n * n, first = n * (n * a.gpu() / a.gpus()), end = n * (n * (a.gpu() + 1) / a.gpus());
  const std::uint64_t chunks = (end - first + warp_chunk - 1) / warp_chunk;
  const std::uint64_t warp = blockIdx.x * std::uint64_t{chunk_block_warps} + w, warps = std::uint64_t{gridDim.x} * chunk_block_warps;
  for (unsigned s = 0; s < sweeps; ++s) {
    const Grid& cur = s % 2 == 0 ? a : b;
    const Grid& next = s % 2 == 0 ? b : a;
    for (std::uint64_t c = warp; c < chunks; c += warps) {
      const std::uint64_t i0 = first + c * warp_chunk;
      const auto count = static_cast<std::uint32_t>(end - i0 < warp_chunk ? end - i0 : warp_chunk);
      // middle[k] is cell i0 - 1 + k; only interior cells read their neighbours, so each run is
      // clipped to the grid.
      const std::uint64_t lo = i0 > 0 ? i0 - 1 : 0, hi = i0 + count + 1 < cells ? i0 + count + 1 : cells;
      warp_read_run(cur, lo, static_cast<std::uint32_t>(hi - lo), middle[w] + (lo + 1 - i0));
      if (i0 + count > n) {  // above[k] is cell i0 + k - n, for the chunk's cells in row 1 and down
        const std::uint64_t from = i0 > n ? i0 : n;
        warp_read_run(cur, from - n, static_cast<std::uint32_t>(i0 + count - from), above[w] + (from - i0));
      }
      if (i0 < cells - n) {  // below[k] is cell i0 + k + n, for the cells above the last row
        const std::uint64_t to = i0 + count < cells - n ? i0 + count : cells - n;
        warp_read_run(cur, i0 + n, static_cast<std::uint32_t>(to - i0), below[w]);
      }
      __syncwarp();
      for (unsigned j = threadIdx.x % 32; j < count; j += 32) {
        const std::uint64_t i = i0 + j, r = i / n, col = i % n;
        std::uint32_t v = middle[w][j + 1];
        if (r > 0 && r + 1 < n && col > 0 && col + 1 < n) v = v * 3 + above[w][j] + below[w][j] + middle[w][j] + middle[w][j + 2];
        result[w][j] = v;
      }
      __syncwarp();
      warp_write_run(next, i0, count, result[w]);
      __syncwarp();  // the next chunk's staging overwrites what this one's lanes read
    }
    grid_barrier(barrier, total_blocks, s);
  }
}

// ---- FFT: the forward DFT of n = 2^k complex floats, radix-2 Stockham (out of place and ----
// self-sorting: no bit reversal): stages t = 0 .. k-1 in one kernel, each reading one object and writing the other,
// a barrier across every GPU's blocks between them (as stencil2d's sweeps). In stage t (span
// s = 2^t) output o = 2sp + hs + q (q < s, h the half) is x[sp + q] + x[sp + q + n/2] when h = 0,
// else (x[sp + q] - x[sp + q + n/2]) exp(-2 pi i ps / n). Each GPU writes a contiguous share of
// the outputs, a warp per chunk of warp_chunk; a chunk reads two runs of x, half of them written
// by another GPU in the stage before (all of x in the last log2(gpus) stages).
template <class Vec>
__global__ void __launch_bounds__(chunk_block_warps * 32)
    fft_kernel(Vec a, Vec b, std::uint64_t n, unsigned stages, unsigned* barrier, unsigned total_blocks) {
  // Per warp: the chunk's inputs from the lower and the upper half of x; then its outputs in low.
  __shared__ float2 low[chunk_block_warps][warp_chunk], high[chunk_block_warps][warp_chunk];
  constexpr unsigned per_lane = warp_chunk / 32;
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Shares in whole chunks (n is a multiple of warp_chunk), so every chunk starts at a multiple of it.
  const std::uint64_t chunks = n / warp_chunk, first = chunks * a.gpu() / a.gpus(), end = chunks * (a.gpu() + 1) / a.gpus();
  const std::uint64_t warp = blockIdx.x * std::uint64_t{chunk_block_warps} + w, warps = std::uint64_t{gridDim.x} * chunk_block_warps;
  const float inverse_n = 1.0f / static_cast<float>(n);  // exact: n is a power of two
  for (unsigned t = 0; t < stages; ++t) {
    const Vec& x = t % 2 == 0 ? a : b;
    const Vec& y = t % 2 == 0 ? b : a;
    const std::uint64_t s = std::uint64_t{1} << t;
    for (std::uint64_t c = first + warp; c < end; c += warps) {
      const std::uint64_t o0 = c * warp_chunk;
      // A chunk inside one half of a 2s block reads warp_chunk consecutive inputs from each half
      // of x; a chunk of whole blocks (2s <= warp_chunk) half as many, each feeding two outputs.
      const std::uint64_t i0 = s >= warp_chunk ? o0 % s + s * (o0 / (2 * s)) : o0 / 2;
      const std::uint32_t run = s >= warp_chunk ? warp_chunk : warp_chunk / 2;
      warp_read_run(x, i0, run, low[w]);
      warp_read_run(x, i0 + n / 2, run, high[w]);
      __syncwarp();
      float2 out[per_lane];
#pragma unroll
      for (unsigned k = 0; k < per_lane; ++k) {
        const std::uint64_t o = o0 + lane + 32 * k, p = o / (2 * s), input = s * p + o % s - i0;
        const float2 u = low[w][input], v = high[w][input];
        if (o % (2 * s) < s) {
          out[k] = make_float2(u.x + v.x, u.y + v.y);
          continue;
        }
        // exp(-2 pi i ps / n): 2ps < n is exact as a float below 2^24, rounded above (the same
        // twiddle in every mode).
        float sine, cosine;
        sincospif(-static_cast<float>(2 * p * s) * inverse_n, &sine, &cosine);
        const float re = u.x - v.x, im = u.y - v.y;
        // Explicitly rounded: no product contracted into an FMA, in any instantiation, so every
        // mode computes the reference's bits.
        out[k] = make_float2(__fsub_rn(__fmul_rn(re, cosine), __fmul_rn(im, sine)),
                             __fadd_rn(__fmul_rn(re, sine), __fmul_rn(im, cosine)));
      }
      __syncwarp();  // every lane has read its inputs before low takes the outputs
#pragma unroll
      for (unsigned k = 0; k < per_lane; ++k) low[w][lane + 32 * k] = out[k];
      __syncwarp();
      warp_write_run(y, o0, warp_chunk, low[w]);
      __syncwarp();  // the next chunk's staging overwrites what this one's lanes wrote out
    }
    grid_barrier(barrier, total_blocks, t);
  }
}

// ---- GEMM: C (m x n) = A (m x k) x B (k x n), fp32; m and k multiples of 64, n of 256 ----
// 64 x 256 tiles of C, each GPU a contiguous share of them in row-major tile order (a band of C's
// rows: its pages written by one GPU, as the OASIS paper's MM_C and C2D's GEMM output are),
// 256 threads with 8 x 8 elements each. Per 64-element k step the block stages A's 64 x 64 tile
// and B's 64 x 256 tile in shared memory, each warp its own 8 rows of both, one hold per row (A's
// 256 B and B's 1 KB rows start at multiples of their length, so each lies in one page), and
// C's tile goes back the same way, a 1 KB row per hold. That is 128 holds per 64 x 256 x 64
// multiply-adds, where 64 x 64 tiles took 128 per 64 x 64 x 64 (and a store per element of C):
// 4x fewer.
constexpr unsigned gemm_tile_rows = 64, gemm_tile_cols = 256, gemm_k_step = 64;
constexpr unsigned gemm_threads = 256, gemm_rows_per_warp = gemm_tile_rows / (gemm_threads / 32);
constexpr unsigned gemm_cols_per_lane = gemm_tile_cols / 32;
/// A's tile then B's (which holds C's tile after the last k step), above the 48 KB static limit.
constexpr std::size_t gemm_shared_bytes = (gemm_tile_rows + gemm_tile_cols) * gemm_k_step * sizeof(float);
// A warp stages row r of both tiles, and C's tile takes B's place.
static_assert(gemm_tile_rows == gemm_k_step, "gemm_kernel's tiles need as many rows as k steps");

/// The warp copies rows first_row .. first_row + gemm_rows_per_warp - 1 of a tile between `array`
/// and shared memory (row r at tile + r * width; 16-byte aligned): row r is elements
/// [origin + r * stride, + width) of `array`, which must lie in one page. Read: into `tile`;
/// read_write: out of it. Four lanes per row, so the warp's holds (one per row) are taken together
/// (access_page serves the pages of a warp's lanes at once) instead of one after another as
/// warp_read_run's would be.
template <unsigned width, access A, class Array>
__device__ void warp_copy_tile_rows(const Array& array, std::uint64_t origin, std::uint64_t stride, unsigned first_row,
                                    float* tile) {
  constexpr unsigned lanes_per_row = 32 / gemm_rows_per_warp;
  static_assert(width % (4 * lanes_per_row) == 0, "each lane copies whole float4s");
  const unsigned r = first_row + threadIdx.x % 32 / lanes_per_row, part = threadIdx.x % lanes_per_row;
  float* const row = tile + r * width;
  array.template with_span<A>(origin + r * stride, width, [&](auto* data) {
    for (unsigned j = part * 4; j < width; j += lanes_per_row * 4) {
      if constexpr (A == access::read)
        *reinterpret_cast<float4*>(row + j) = *reinterpret_cast<const float4*>(data + j);
      else
        *reinterpret_cast<float4*>(data + j) = *reinterpret_cast<const float4*>(row + j);
    }
  });
}

template <class M>
__global__ void __launch_bounds__(gemm_threads, 2)
    gemm_kernel(M A, M B, M C, std::uint64_t m, std::uint64_t n, std::uint64_t k_size) {
  extern __shared__ float4 gemm_shared[];  // float4: the tile rows' copies are 16-byte accesses
  float* const a_tile = reinterpret_cast<float*>(gemm_shared);  // [64][64]
  float* const b_tile = a_tile + gemm_tile_rows * gemm_k_step;  // [64][256], then C's [64][256]
  // A warp owns tile rows first_row .. first_row + 7: it stages those rows of A, B and C and
  // computes C's. A lane's columns are lane + 32 j: the warp's reads of A's tile are broadcasts,
  // its reads and writes of B's and C's consecutive words (no bank conflicts).
  const unsigned lane = threadIdx.x % 32, first_row = threadIdx.x / 32 * gemm_rows_per_warp;
  const std::uint64_t col_tiles = n / gemm_tile_cols, tiles = m / gemm_tile_rows * col_tiles;
  const std::uint64_t first = tiles * C.gpu() / C.gpus(), end = tiles * (C.gpu() + 1) / C.gpus();
  for (std::uint64_t t = first + blockIdx.x; t < end; t += gridDim.x) {
    const std::uint64_t row0 = t / col_tiles * gemm_tile_rows, col0 = t % col_tiles * gemm_tile_cols;
    float acc[gemm_rows_per_warp][gemm_cols_per_lane] = {};
    for (std::uint64_t k0 = 0; k0 < k_size; k0 += gemm_k_step) {
      warp_copy_tile_rows<gemm_k_step, access::read>(A, row0 * k_size + k0, k_size, first_row, a_tile);
      warp_copy_tile_rows<gemm_tile_cols, access::read>(B, k0 * n + col0, n, first_row, b_tile);
      __syncthreads();
      // Unrolled by 4, a row's four values of A become one 16-byte shared load (ld.shared.v4).
#pragma unroll 4
      for (unsigned kk = 0; kk < gemm_k_step; ++kk) {
        float a[gemm_rows_per_warp], b[gemm_cols_per_lane];
#pragma unroll
        for (unsigned i = 0; i < gemm_rows_per_warp; ++i) a[i] = a_tile[(first_row + i) * gemm_k_step + kk];
#pragma unroll
        for (unsigned j = 0; j < gemm_cols_per_lane; ++j) b[j] = b_tile[kk * gemm_tile_cols + lane + 32 * j];
#pragma unroll
        for (unsigned i = 0; i < gemm_rows_per_warp; ++i)
#pragma unroll
          for (unsigned j = 0; j < gemm_cols_per_lane; ++j) acc[i][j] += a[i] * b[j];
      }
      __syncthreads();  // every warp is done with both tiles before they are restaged
    }
    // The warp's rows of C into its own rows of B's tile, then out; a warp only ever stages its
    // own rows, so the warp's barriers order these with the next tile's staging.
    float* const c_tile = b_tile;
#pragma unroll
    for (unsigned i = 0; i < gemm_rows_per_warp; ++i)
#pragma unroll
      for (unsigned j = 0; j < gemm_cols_per_lane; ++j) c_tile[(first_row + i) * gemm_tile_cols + lane + 32 * j] = acc[i][j];
    __syncwarp();
    warp_copy_tile_rows<gemm_tile_cols, access::read_write>(C, row0 * n + col0, n, first_row, c_tile);
    __syncwarp();
  }
}

/// visit(u) for each neighbour u in columns[begin, end), in order, a page's run at a time under
/// one hold (with_span; `per_page`: columns.elements_per_page(); u refers into the held page):
/// how pagerank and bfs walk a row.
template <class Cl, class Visit>
__device__ void for_each_neighbour(const Cl& columns, std::uint64_t per_page, std::uint64_t begin, std::uint64_t end,
                                   Visit&& visit) {
  for_each_page_piece(per_page, begin, end, [&](std::uint64_t e, std::uint32_t run) {
    columns.template with_span<access::read>(e, run, [&](const std::uint32_t* neighbours) {
      for (std::uint32_t j = 0; j < run; ++j) visit(neighbours[j]);
    });
  });
}

// ---- PageRank (pull) over an R-MAT CSR: x[u] = rank[u] / degree(u); one launch per iteration ----
// A lane walks its adjacency run one page at a time under one hold (with_span) and gathers the
// neighbours' ranks inside it (nested accesses, in the same order as element by element).
template <class O, class Cl, class X>
__global__ void pagerank_kernel(O offsets, Cl columns, X x_cur, X x_next, std::uint64_t vertices) {
  const std::uint64_t v0 = vertices * x_next.gpu() / x_next.gpus(), v1 = vertices * (x_next.gpu() + 1) / x_next.gpus();
  const std::uint64_t per_page = columns.elements_per_page();
  for (std::uint64_t v = v0 + tid(); v < v1; v += nthreads()) {
    const std::uint64_t begin = offsets.load(v), end = offsets.load(v + 1);
    float sum = 0;
    for_each_neighbour(columns, per_page, begin, end, [&](const std::uint32_t& u) { sum += x_cur.load(u); });
    const float rank = 0.15f / static_cast<float>(vertices) + 0.85f * sum;
    x_next.store(v, end > begin ? rank / static_cast<float>(end - begin) : rank);
  }
}

// ---- BFS, top-down and level-synchronous, over the same R-MAT CSR: one launch per level ----
// Each GPU scans every gpus()-th vertex (interleaved: R-MAT's high-degree vertices are the low
// ids, so contiguous parts would not balance, and every page of the graph is read by every GPU)
// for those at `level` and claims their unvisited neighbours (read first, then compare_exchange)
// for level + 1 on depth (read and written by every GPU: the shared-write object), walking each adjacency run
// one page at a time under one hold as pagerank does. A warp that claimed a vertex stores
// level + 1 into `reached` (a word on the first GPU, reached by peers): the host stops after the
// first level that claims nothing.
template <class O, class Cl, class D>
__global__ void bfs_level_kernel(O offsets, Cl columns, D depth, std::uint64_t vertices, std::uint32_t level,
                                 unsigned* reached) {
  const std::uint64_t per_page = columns.elements_per_page();
  bool claimed = false;
  for (std::uint64_t v = depth.gpu() + tid() * depth.gpus(); v < vertices; v += nthreads() * depth.gpus()) {
    // Depths at `level` were written in an earlier launch; this one only turns unvisited ones
    // into level + 1, so a concurrent claim never changes what this test sees.
    if (depth.load(v) != level) continue;
    const std::uint64_t begin = offsets.load(v), end = offsets.load(v + 1);
    for_each_neighbour(columns, per_page, begin, end, [&](const std::uint32_t& u) {
      // The read filters visited vertices without a write hold (as a GPU BFS does); a stale
      // "unvisited" only costs a failed claim.
      std::uint32_t expected = workloads::bfs_unreached;
      if (depth.load(u) == expected && depth.compare_exchange(u, expected, level + 1)) claimed = true;
    });
  }
  // One store per warp that claimed anything (over NVLink for the other GPUs), not one per lane.
  const unsigned lanes = __activemask();
  if (__any_sync(lanes, claimed) && detail::lane_id() == detail::first_lane(lanes))
    cuda::atomic_ref<unsigned, cuda::thread_scope_system>(*reached).store(level + 1, cuda::std::memory_order_relaxed);
}

/// Runs `launch` (a barrier kernel of `rounds` rounds on `space`'s streams) while the host polls
/// the barrier word (on GPU 0) with 4-byte copies on a stream of its own, and the space's
/// counters (stats_now()) whenever the word changed, and prints on stderr, per round, the
/// milliseconds it took and what the GPUs counted in it: a round ends when the word reaches its
/// share of the final count (every block arrives once a round). Times start when `launch`
/// returns (its setup, such as zeroing the word, is not in round 1; the kernels may have begun a
/// little before). Resolution: one poll, a 4-byte copy plus a counter copy per GPU, some tens of
/// us; a round that ended within the poll after another's shows "-" (its time and counts are in
/// that round's), and a round's counts include what the next one did before the poll saw it end.
template <class Launch>
void print_barrier_rounds(const std::string& what, const unsigned* word, std::uint32_t rounds, const MultiGpuSpace& space,
                          Launch&& launch) {
  std::vector<cudaStream_t> streams(space.gpus());
  for (unsigned g = 0; g < space.gpus(); ++g) streams[g] = space.stream(g);
  const OnDevice on_first(0);  // the word's GPU
  const detail::stream_ptr poll = detail::make_stream();
  const detail::pinned_ptr<unsigned> seen = detail::make_pinned_zeroed<unsigned>(1, cudaHostAllocDefault, "barrier poll word");
  struct Sample {
    double ms;  // since the launch
    unsigned count;
    GpuPlacementStats stats;
  };
  std::vector<Sample> samples;
  launch();
  const auto began = std::chrono::steady_clock::now();
  const auto busy = [&] {
    for (cudaStream_t s : streams)
      if (cudaStreamQuery(s) == cudaErrorNotReady) return true;
    return false;
  };
  for (bool running = true; running;) {
    running = busy();  // read before the poll, so that the last poll sees the final count
    check(cudaMemcpyAsync(seen.get(), word, sizeof(unsigned), cudaMemcpyDeviceToHost, poll.get()), "barrier poll");
    check(cudaStreamSynchronize(poll.get()), "barrier poll");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    if (samples.empty() || samples.back().count != *seen) samples.push_back({ms, *seen, space.stats_now().total()});
  }
  for (cudaStream_t s : streams) check(cudaStreamSynchronize(s), "barrier-timed run");
  samples.back().stats = space.stats_now().total();  // every count of the run
  const unsigned per_round = samples.back().count / rounds;
  if (per_round == 0 || samples.back().count % rounds != 0)
    std::fprintf(stderr, "[barrier rounds] %s: the word ended at %u, not a whole number of rounds of %u\n", what.c_str(),
                 samples.back().count, rounds);
  using Field = std::uint64_t GpuPlacementStats::*;
  const struct {
    const char* name;
    Field field;
  } columns[] = {{"shared faults", &GpuPlacementStats::shared_faults},
                 {"migrations", &GpuPlacementStats::migrations},
                 {"replications", &GpuPlacementStats::replications},
                 {"collapses", &GpuPlacementStats::collapses},
                 {"remote maps", &GpuPlacementStats::remote_maps},
                 {"counter migrations", &GpuPlacementStats::counter_migrations}};
  std::vector<std::string> lines(1 + std::size(columns));
  lines[0] = "[barrier rounds] " + what + ": ms";
  for (std::size_t c = 0; c < std::size(columns); ++c) lines[c + 1] = "[barrier rounds] " + what + ": " + columns[c].name;
  Sample last{0, 0, GpuPlacementStats{}};
  std::size_t at = 0;
  bool sampled = false;  // `last` is a sample (not the launch)
  for (std::uint32_t t = 0; t < rounds && per_round > 0; ++t) {
    const std::size_t before = at;
    while (at + 1 < samples.size() && samples[at].count < per_round * (t + 1)) ++at;
    if (sampled && at == before) {  // ended in the same poll as the round before
      for (std::string& l : lines) l += " -";
      continue;
    }
    const Sample& end = samples[at];
    char cell[32];
    std::snprintf(cell, sizeof cell, " %.2f", end.ms - last.ms);
    lines[0] += cell;
    for (std::size_t c = 0; c < std::size(columns); ++c) {
      std::snprintf(cell, sizeof cell, " %llu",
                    static_cast<unsigned long long>(end.stats.*columns[c].field - last.stats.*columns[c].field));
      lines[c + 1] += cell;
    }
    last = end;
    sampled = true;
  }
  for (const std::string& l : lines) std::fprintf(stderr, "%s\n", l.c_str());
}

/// Zeroes `word` (on the first GPU) and waits: the kernels that read it run on non-blocking
/// streams, which a memset on the legacy stream does not order.
void zero_device_word(unsigned* word) {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaMemset(word, 0, sizeof(unsigned)), "device word reset");
  check(cudaDeviceSynchronize(), "device word reset");
}

/// bfs's host loop: `launch_level(level)` launches one level's kernels and waits for them, for
/// level 0, 1, ... until a level claims nothing (its kernels leave `reached` below level + 1).
void run_bfs_levels(unsigned* reached, const std::function<void(std::uint32_t)>& launch_level) {
  zero_device_word(reached);
  for (std::uint32_t level = 0;; ++level) {
    launch_level(level);
    unsigned seen = 0;
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMemcpy(&seen, reached, sizeof seen, cudaMemcpyDeviceToHost), "bfs level flag");
    if (seen != level + 1) return;
  }
}

// ---- im2col: 3 x 3 patches, "same" zero padding, stride 1 ----
// col (channels * 9 rows x height * width columns): col[(c * 9 + r * 3 + s) * hw + y * width + x]
// is image[c][y + r - 1][x + s - 1], 0 outside the image. Each GPU writes one contiguous part
// of col (private writes) and reads the image planes it needs (shared only at part boundaries).
template <class Img, class Col>
__global__ void __launch_bounds__(chunk_block_warps * 32)
    im2col_kernel(Img image, Col col, std::uint32_t channels, std::uint32_t height, std::uint32_t width) {
  // Per warp: the image run its chunk's segment reads, and the chunk's values.
  __shared__ float staged[chunk_block_warps][warp_chunk], values[chunk_block_warps][warp_chunk];
  const unsigned w = threadIdx.x / 32;
  const std::uint64_t hw = std::uint64_t{height} * width, total = std::uint64_t{channels} * 9 * hw;
  const std::uint64_t begin = total * col.gpu() / col.gpus(), end = total * (col.gpu() + 1) / col.gpus();
  const std::uint64_t chunks = (end - begin + warp_chunk - 1) / warp_chunk;
  const std::uint64_t warp = blockIdx.x * std::uint64_t{chunk_block_warps} + w, warps = std::uint64_t{gridDim.x} * chunk_block_warps;
  for (std::uint64_t k = warp; k < chunks; k += warps) {
    const std::uint64_t i0 = begin + k * warp_chunk;
    const auto count = static_cast<std::uint32_t>(end - i0 < warp_chunk ? end - i0 : warp_chunk);
    // Within one row of col (one channel and tap) the image index is the pixel plus a constant,
    // so a segment of the chunk inside one row reads one run of the channel's plane.
    for (std::uint64_t seg = i0; seg < i0 + count;) {
      const std::uint64_t row = seg / hw, seg_end = i0 + count < (row + 1) * hw ? i0 + count : (row + 1) * hw;
      const long long dy = static_cast<long long>(row % 9 / 3) - 1, dx = static_cast<long long>(row % 3) - 1;
      const long long plane = static_cast<long long>(row / 9 * hw), offset = plane + dy * width + dx;
      const long long first_read = static_cast<long long>(seg % hw) + offset;
      const long long end_read = static_cast<long long>((seg_end - 1) % hw) + offset + 1, plane_end = plane + static_cast<long long>(hw);
      const long long run_lo = first_read > plane ? first_read : plane, run_hi = end_read < plane_end ? end_read : plane_end;
      if (run_hi > run_lo) warp_read_run(image, static_cast<std::uint64_t>(run_lo), static_cast<std::uint32_t>(run_hi - run_lo), staged[w]);
      __syncwarp();
      for (std::uint64_t i = seg + threadIdx.x % 32; i < seg_end; i += 32) {
        const std::uint64_t pixel = i % hw;
        const long long y = static_cast<long long>(pixel / width) + dy, x = static_cast<long long>(pixel % width) + dx;
        // A pixel inside the image reads plane + y * width + x = pixel + offset, inside the run.
        values[w][i - i0] = y >= 0 && y < height && x >= 0 && x < width ? staged[w][static_cast<long long>(pixel) + offset - run_lo] : 0.0f;
      }
      __syncwarp();  // the next segment's staging overwrites what this one's lanes read
      seg = seg_end;
    }
    warp_write_run(col, i0, count, values[w]);
    __syncwarp();
  }
}

constexpr unsigned sweeps = 4;      ///< stencil2d sweeps inside its one kernel
constexpr std::uint64_t conv_channels = 64;  ///< conv2d's input planes (9 x 64 = 576 GEMM k, a multiple of 64)
constexpr std::uint64_t conv_filters = 64;   ///< conv2d's output planes (GEMM m)
constexpr unsigned iterations = 3;  ///< pagerank launches
constexpr std::uint64_t min_fft_points = 4096;  ///< fft's smallest n: 16 chunks, a share for up to 16 GPUs

struct Args {
  std::vector<unsigned> gpus{2};
  std::uint64_t bytes = 1ull << 30;
  std::vector<std::string> workloads{"transpose", "stencil2d", "gemm", "pagerank", "im2col", "conv2d"};
  std::vector<std::uint32_t> reset_thresholds{detail::default_reset_threshold};  ///< oasis: one run each
  std::uint32_t counter_threshold = detail::default_counter_threshold;
  std::uint64_t page_bytes = MultiGpuConfig{}.page_bytes;  ///< the paged modes' page size
  double cache_fraction = 1.0;  ///< the paged modes' pool per GPU, as a fraction of the footprint
  std::optional<Spread> initial_spread;  ///< --initial-placement: nullopt for the host (the default)
  bool barrier_times = false;  ///< --barrier-times 1: one more paged run of stencil2d and fft, its rounds timed
  Options out;  ///< the shared options (add_shared_options)
};

/// A request that cannot run (an unknown mode or workload, more GPUs than visible): the message
/// on stderr, exit code 2, as for a bad option.
[[noreturn]] void usage(const std::string& m) {
  std::fprintf(stderr, "warpvm-placement-bench: %s\nRun with --help for more information.\n", m.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  a.out.suite = "placement";
  a.out.modes = {"on_touch", "access_counter", "duplication", "oasis", "ideal"};
  CLI::App app{"warpvm-placement-bench: OASIS placement on N GPUs, JSON Lines out.\n"
               "modes: on_touch, access_counter, duplication, oasis, ideal; also uvm, uvm_read_mostly, uvm_accessed_by\n"
               "(not run by default): real UVM, the raw kernels on every GPU over one cudaMallocManaged copy per object,\n"
               "in core only (a mode is skipped, with a message, when the footprint does not fit what every GPU has free).",
               "warpvm-placement-bench"};
  add_shared_options(app, a.out);
  cli::add_list(app, "--gpus", a.gpus, "GPU counts to run")->check(CLI::PositiveNumber);
  cli::add_bytes(app, "--bytes", a.bytes, "footprint of each workload");
  cli::add_list(app, "--workloads", a.workloads,
                "transpose, stencil2d, gemm, pagerank, im2col, conv2d (the default), bfs, fft (a 1D complex FFT of the "
                "largest 2^k points that fit --bytes), transpose_flat (paged modes access every element by flat address)");
  cli::add_list(app, "--reset-thresholds", a.reset_thresholds,
                "oasis runs once per O-Table reset threshold (the paper's sensitivity study)")
      ->check(CLI::Range(1u, unsigned(detail::otable::max_reset_threshold)));
  app.add_option("--counter-threshold", a.counter_threshold, "access_counter: remote accesses before a page migrates")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--page-bytes",
         [&a](const std::string& text) {
           std::uint64_t bytes = 0;
           try {
             bytes = cli::parse_bytes(text);
           } catch (const std::logic_error&) {
           }
           if (bytes < 4096 || !std::has_single_bit(bytes))
             throw CLI::ValidationError("--page-bytes", "must be a power of two, at least 4 KiB");
           a.page_bytes = bytes;
         },
         "the paged modes' page size (records of another size than 4 KiB name their policy <mode>_page<bytes>)");
  app.add_option("--cache-fraction", a.cache_fraction,
                 "each GPU's frame pool in the paged modes as a fraction of the footprint; below 1 pages are evicted "
                 "(ideal and the uvm modes run in core)")
      ->check(cli::unit_fraction);
  cli::add_initial_placement(app, a.initial_spread);
  app.add_option_function<unsigned>(
      "--barrier-times", [&a](unsigned on) { a.barrier_times = on != 0; },
      "1: after the timed runs of a paged mode of stencil2d or fft, one more run whose barrier rounds the host times");
  cli::parse(app, argc, argv);
  return a;
}

/// The real-UVM modes: managed memory with no advice, ReadMostly on the objects the workload only
/// reads, or AccessedBy every GPU on every object.
enum class UvmAdvice { none, read_mostly, accessed_by };

std::optional<UvmAdvice> uvm_advice_of(const std::string& mode) {
  if (mode == "uvm") return UvmAdvice::none;
  if (mode == "uvm_read_mostly") return UvmAdvice::read_mostly;
  if (mode == "uvm_accessed_by") return UvmAdvice::accessed_by;
  return std::nullopt;
}

PlacementPolicy policy_of(const std::string& mode) {
  for (PlacementPolicy p : {PlacementPolicy::on_touch, PlacementPolicy::access_counter, PlacementPolicy::duplication,
                            PlacementPolicy::oasis})
    if (mode == to_string(p)) return p;
  usage("unknown mode " + mode);
}

/// What the raw form's pointers are: a device copy of every object per GPU (the reference, the
/// ideal bound), or one copy that every GPU shares (managed memory: the uvm modes), where what a
/// GPU wrote in one phase must be complete before any GPU reads it in the next.
enum class Copies { per_gpu, shared };

/// A workload's objects, as host data (the inputs), and how to run it three ways.
struct Workload {
  std::string name;
  std::vector<std::vector<std::uint32_t>> objects;  ///< initial contents, as 32-bit words
  std::size_t output;                               ///< the object that holds the result
  std::vector<std::size_t> read_only;               ///< the objects the kernels never write (uvm_read_mostly)
  std::uint64_t useful_bytes;
  /// Rounds of the grid barrier in its one kernel (stencil2d's sweeps, fft's stages); 0: none.
  std::uint32_t barrier_rounds = 0;
  /// Runs the kernel(s) on `gpus` GPUs with the objects given as Raw pointers per GPU.
  std::function<void(const std::vector<std::vector<std::uint32_t*>>&, const std::vector<cudaStream_t>&, unsigned gpus, Copies)>
      raw;
  /// Runs through a space; `objs` are its objects in order.
  std::function<void(MultiGpuSpace&, const std::vector<shared_object<std::uint32_t>>&)> paged;
  /// Optional: checks sampled outputs of the single-GPU reference against a host computation from
  /// the initial objects (that the kernels compute what the workload says); a message if one is off.
  std::function<std::string(const std::vector<std::vector<std::uint32_t>>& objects, const std::vector<std::uint32_t>& output)>
      check_reference;
};

template <class T>
Raw<T> raw_of(std::uint32_t* p, std::uint64_t words, unsigned g, unsigned G) {
  return Raw<T>{reinterpret_cast<T*>(p), words * 4 / sizeof(T), g, G};
}
template <class T>
shared_array<T> as(const shared_array<std::uint32_t>& a) {
  return a.template as<T>();
}

unsigned occupancy_blocks(const void* kernel, int block, int device, std::size_t shared_bytes = 0) {
  int per_sm = 0, sms = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, shared_bytes), "occupancy");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  return static_cast<unsigned>(std::max(1, per_sm) * sms);
}

/// Checks gemm_kernel's shape and lets gemm_kernel<M> use its dynamic shared memory (above the
/// 48 KB default: an attribute of each device's copy of the kernel) on devices 0 .. gpus - 1, the
/// benchmark's GPUs in every mode; returns the blocks to launch per GPU.
template <class M>
unsigned prepare_gemm(unsigned gpus, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
  if (m % gemm_tile_rows != 0 || n % gemm_tile_cols != 0 || k % gemm_k_step != 0)
    throw std::invalid_argument("gemm_kernel: C " + std::to_string(m) + " x " + std::to_string(n) + ", k " + std::to_string(k) +
                                ": m and k must be multiples of " + std::to_string(gemm_tile_rows) + ", n of " +
                                std::to_string(gemm_tile_cols));
  const auto kernel = reinterpret_cast<const void*>(gemm_kernel<M>);
  for (unsigned g = 0; g < gpus; ++g) {
    check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(gemm_shared_bytes)),
          "cudaFuncSetAttribute(gemm_kernel)");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  return occupancy_blocks(kernel, gemm_threads, 0, gemm_shared_bytes);
}

/// Floats in [-1, 1), multiples of 1/512 (so every product of two is exact in fp32), from `salt`.
void fill_small_floats(std::vector<std::uint32_t>& words, std::uint64_t salt) {
  auto* f = reinterpret_cast<float*>(words.data());
  parallel_for(words.size(), [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) f[i] = static_cast<float>(workloads::mix64(i * 3 + salt) % 1024) / 512.0f - 1.0f;
  });
}

/// The forward DFT of `x` (its size a power of two) in double: iterative radix-2 Cooley-Tukey
/// after a bit-reversal permutation, another algorithm than fft_kernel's Stockham stages.
std::vector<std::complex<double>> host_fft(const std::vector<std::complex<double>>& x) {
  const std::uint64_t n = x.size();
  const auto bits = static_cast<unsigned>(std::countr_zero(n));
  std::vector<std::complex<double>> y(n), twiddle(n / 2);
  parallel_for(n / 2, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t k = lo; k < hi; ++k)
      twiddle[k] = std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  });
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) {
      std::uint64_t reversed = 0;
      for (unsigned bit = 0; bit < bits; ++bit) reversed |= (i >> bit & 1) << (bits - 1 - bit);
      y[reversed] = x[i];
    }
  });
  for (std::uint64_t half = 1; half < n; half *= 2)
    parallel_for(n / 2, [&](std::uint64_t lo, std::uint64_t hi) {
      for (std::uint64_t butterfly = lo; butterfly < hi; ++butterfly) {
        const std::uint64_t j = butterfly % half, i = butterfly / half * 2 * half + j;
        const std::complex<double> odd = twiddle[j * (n / (2 * half))] * y[i + half];
        y[i + half] = y[i] - odd;
        y[i] += odd;
      }
    });
  return y;
}

/// conv2d's shape: `channels` input planes of height x width (square, its side a multiple of
/// `side_step`), `filters` 3 x 3 filters, "same" zero padding.
struct ConvShape {
  std::uint64_t channels = conv_channels, filters = conv_filters, height = 8, width = 8;
  [[nodiscard]] std::uint64_t pixels() const { return height * width; }
  [[nodiscard]] std::uint64_t taps() const { return channels * 9; }  ///< im2col's rows, GEMM's k
  /// The smallest square image (side a multiple of `side_step`) whose objects take at least
  /// `bytes`, where `words_per_pixel` counts the objects' 32-bit words per pixel and `fixed_words`
  /// the rest.
  static ConvShape at_least(std::uint64_t bytes, std::uint64_t words_per_pixel, std::uint64_t fixed_words,
                            std::uint64_t side_step) {
    ConvShape c;
    const double pixels = std::max(0.0, (static_cast<double>(bytes) / 4.0 - static_cast<double>(fixed_words)) /
                                            static_cast<double>(words_per_pixel));
    c.height = c.width = std::max<std::uint64_t>(
        side_step, static_cast<std::uint64_t>(std::ceil(std::sqrt(pixels) / static_cast<double>(side_step))) * side_step);
    return c;
  }
};

/// An R-MAT graph's parameters and row offsets (rmat_objects).
struct RmatInput {
  workloads::RmatParams graph;
  std::vector<std::uint64_t> offsets;
};

/// pagerank's and bfs's graph: the smallest R-MAT (scale at most 28) whose CSR and
/// `vertex_arrays` arrays of 4-byte values per vertex take at least `bytes`. Its row offsets
/// (uint64, two words each) become object 0 of `w` and its columns object 1; the vertex arrays
/// are objects 2 on, left for the caller to fill.
RmatInput rmat_objects(Workload& w, std::uint64_t bytes, unsigned vertex_arrays) {
  RmatInput in{.graph = {.scale = 4}, .offsets = {}};
  const auto footprint = [&](const workloads::RmatParams& p) { return p.csr_bytes() + vertex_arrays * p.vertices() * 4; };
  while (in.graph.scale < 28 && footprint(in.graph) < bytes) ++in.graph.scale;
  const std::uint64_t v = in.graph.vertices();
  in.offsets.resize(v + 1);
  w.objects.resize(2 + vertex_arrays);
  w.objects[1].resize(in.graph.directed_edges());
  workloads::build_rmat_csr(in.graph, in.offsets, w.objects[1], parallel_for);
  w.objects[0].resize(2 * (v + 1));
  std::memcpy(w.objects[0].data(), in.offsets.data(), (v + 1) * 8);
  return in;
}

/// `device_word`: one unsigned on the first GPU that every GPU reaches (stencil2d's barrier,
/// bfs's level flag).
Workload make_workload(const std::string& name, std::uint64_t bytes, unsigned* device_word) {
  Workload w;
  w.name = name;
  if (name == "transpose" || name == "transpose_flat") {
    const std::uint64_t n = std::max<std::uint64_t>(32, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)) / 32 * 32);
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 11);
    w.output = 1;
    w.read_only = {0};
    w.useful_bytes = 2 * n * n * 4;
    w.raw = [n](const auto& p, const auto& streams, unsigned G, Copies) {
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        transpose_kernel<<<1056, dim3(32, 8), 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G),
                                                              raw_of<std::uint32_t>(p[g][1], n * n, g, G), n, n);
      }
    };
    if (name == "transpose_flat")
      w.paged = [n](MultiGpuSpace& s, const auto& o) {
        s.launch(transpose_flat_kernel, dim3(1056), dim3(32, 8), 0, s.flat(), o[0].address(), o[1].address(), n, n);
      };
    else
      w.paged = [n](MultiGpuSpace& s, const auto& o) {
        s.launch(transpose_kernel<shared_array<std::uint32_t>>, dim3(1056), dim3(32, 8), 0, o[0].on(0), o[1].on(0), n, n);
      };
  } else if (name == "stencil2d") {
    const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)));
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 12);
    w.output = sweeps % 2;  // both grids are written (swapped every sweep): none is read-only
    w.barrier_rounds = sweeps;
    w.useful_bytes = sweeps * 2 * n * n * 4;
    // The sweeps on the CPU: the staged kernel's index arithmetic checked against the plain rule.
    w.check_reference = [n](const std::vector<std::vector<std::uint32_t>>& objects,
                            const std::vector<std::uint32_t>& output) -> std::string {
      std::vector<std::uint32_t> cur = objects[0], next(n * n);
      for (unsigned s = 0; s < sweeps; ++s) {
        parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
          for (std::uint64_t r = lo; r < hi; ++r)
            for (std::uint64_t c = 0; c < n; ++c) {
              const std::uint64_t i = r * n + c;
              std::uint32_t v = cur[i];
              if (r > 0 && r + 1 < n && c > 0 && c + 1 < n) v = v * 3 + cur[i - n] + cur[i + n] + cur[i - 1] + cur[i + 1];
              next[i] = v;
            }
        });
        std::swap(cur, next);
      }
      for (std::uint64_t i = 0; i < n * n; ++i)
        if (output[i] != cur[i])
          return "stencil2d: cell " + std::to_string(i) + " = " + std::to_string(output[i]) + ", CPU " + std::to_string(cur[i]);
      return {};
    };
    w.raw = [n, barrier = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      const auto kernel = stencil_kernel<Raw<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, 0);
      zero_device_word(barrier);
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        kernel<<<blocks, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G), raw_of<std::uint32_t>(p[g][1], n * n, g, G),
                                               n, sweeps, barrier, blocks * G);
      }
    };
    w.paged = [n, barrier = device_word](MultiGpuSpace& s, const auto& o) {
      const auto kernel = stencil_kernel<shared_array<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, s.device(0));
      zero_device_word(barrier);
      s.launch(kernel, dim3(blocks), dim3(chunk_block_warps * 32), 0, o[0].on(0), o[1].on(0), n, sweeps, barrier, blocks * s.gpus());
    };
  } else if (name == "fft") {
    // Two objects of n complex floats (n a power of two, 16 n bytes at most --bytes): the input,
    // and the other half of the stages' ping-pong. Stage t writes object (t + 1) % 2, so both are
    // written (none is read-only) and the result is in object stages % 2.
    const std::uint64_t n = std::max<std::uint64_t>(min_fft_points, std::bit_floor(bytes / 16));
    const auto stages = static_cast<unsigned>(std::countr_zero(n));
    w.objects.assign(2, std::vector<std::uint32_t>(2 * n, 0));
    fill_small_floats(w.objects[0], 31);
    w.output = stages % 2;
    w.barrier_rounds = stages;
    w.useful_bytes = stages * 2 * n * 8;
    // Every bin against host_fft, within 16 log2(n) 2^-24 ||x||_2: Higham's norm-wise bound for
    // a radix-2 FFT (Accuracy and Stability of Numerical Algorithms, Thm 24.2: ||error||_2 <=
    // log2(n) eta ||X||_2, eta about 6 u plus sincospif's few u, taken as 16 u) spread over the n
    // bins (||X||_2 = sqrt(n) ||x||_2). Rounding errors spread evenly: an fp32 emulation of the
    // kernel's arithmetic peaks at about 0.6 log2(n) u ||x||_2 (docs/placement.md, FFT).
    w.check_reference = [n, stages](const std::vector<std::vector<std::uint32_t>>& objects,
                                    const std::vector<std::uint32_t>& output) -> std::string {
      const auto* input = reinterpret_cast<const float*>(objects[0].data());
      const auto* result = reinterpret_cast<const float*>(output.data());
      std::vector<std::complex<double>> x(n);
      double norm_squared = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        x[i] = {input[2 * i], input[2 * i + 1]};
        norm_squared += std::norm(x[i]);
      }
      const std::vector<std::complex<double>> spectrum = host_fft(x);
      const double bound = 16.0 * stages * std::ldexp(1.0, -24) * std::sqrt(norm_squared);
      double worst_squared = 0;
      for (std::uint64_t k = 0; k < n; ++k) {
        const double error_squared = std::norm(std::complex<double>(result[2 * k], result[2 * k + 1]) - spectrum[k]);
        if (!(error_squared <= bound * bound))  // NaN too
          return "fft: bin " + std::to_string(k) + " = (" + std::to_string(result[2 * k]) + ", " +
                 std::to_string(result[2 * k + 1]) + "), host FFT (" + std::to_string(spectrum[k].real()) + ", " +
                 std::to_string(spectrum[k].imag()) + ")";
        worst_squared = std::max(worst_squared, error_squared);
      }
      std::fprintf(stderr, "fft: %llu points, largest bin error %.3g (bound %.3g)\n", static_cast<unsigned long long>(n),
                   std::sqrt(worst_squared), bound);
      return {};
    };
    // Stages are ordered across GPUs by the barrier (system scope): on one shared copy too.
    w.raw = [n, stages, barrier = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      const auto kernel = fft_kernel<Raw<float2>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, 0);
      zero_device_word(barrier);
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        kernel<<<blocks, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<float2>(p[g][0], 2 * n, g, G),
                                                                  raw_of<float2>(p[g][1], 2 * n, g, G), n, stages, barrier,
                                                                  blocks * G);
        check(cudaGetLastError(), "fft launch");
      }
    };
    w.paged = [n, stages, barrier = device_word](MultiGpuSpace& s, const auto& o) {
      const auto kernel = fft_kernel<shared_array<float2>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, s.device(0));
      zero_device_word(barrier);
      s.launch(kernel, dim3(blocks), dim3(chunk_block_warps * 32), 0, as<float2>(o[0].on(0)), as<float2>(o[1].on(0)), n,
               stages, barrier, blocks * s.gpus());
    };
  } else if (name == "gemm") {
    const std::uint64_t n = std::max<std::uint64_t>(
        gemm_tile_cols, static_cast<std::uint64_t>(std::sqrt(bytes / 12.0)) / gemm_tile_cols * gemm_tile_cols);
    w.objects.assign(3, std::vector<std::uint32_t>(n * n));
    for (int m = 0; m < 2; ++m) fill_small_floats(w.objects[m], static_cast<std::uint64_t>(m));
    w.output = 2;
    w.read_only = {0, 1};
    w.useful_bytes = 3 * n * n * 4;
    // Host spot checks at 4096 sampled elements, exact: every product of two inputs is exact in
    // fp32 (fill_small_floats), so a fused multiply-add rounds as a separate add does, and the
    // host's fp32 sum in the kernel's order (k ascending, from 0) is the kernel's, bit for bit.
    w.check_reference = [n](const std::vector<std::vector<std::uint32_t>>& objects,
                            const std::vector<std::uint32_t>& output) -> std::string {
      const auto* a = reinterpret_cast<const float*>(objects[0].data());
      const auto* b = reinterpret_cast<const float*>(objects[1].data());
      const auto* c = reinterpret_cast<const float*>(output.data());
      constexpr std::uint64_t samples = 4096;
      std::vector<float> expected(samples);
      const auto element = [&](std::uint64_t sample) { return workloads::mix64(sample + 77) % (n * n); };
      parallel_for(samples, [&](std::uint64_t lo, std::uint64_t hi) {
        for (std::uint64_t s = lo; s < hi; ++s) {
          const std::uint64_t row = element(s) / n, col = element(s) % n;
          float sum = 0;
          for (std::uint64_t i = 0; i < n; ++i) sum += a[row * n + i] * b[i * n + col];
          expected[s] = sum;
        }
      });
      for (std::uint64_t s = 0; s < samples; ++s)
        if (const std::uint64_t i = element(s); c[i] != expected[s])
          return "gemm: C[" + std::to_string(i / n) + "][" + std::to_string(i % n) + "] = " + std::to_string(c[i]) +
                 ", host " + std::to_string(expected[s]);
      return {};
    };
    w.raw = [n](const auto& p, const auto& streams, unsigned G, Copies) {
      const unsigned blocks = prepare_gemm<Raw<float>>(G, n, n, n);
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        gemm_kernel<<<blocks, gemm_threads, gemm_shared_bytes, streams[g]>>>(
            raw_of<float>(p[g][0], n * n, g, G), raw_of<float>(p[g][1], n * n, g, G), raw_of<float>(p[g][2], n * n, g, G), n, n, n);
        check(cudaGetLastError(), "gemm launch");
      }
    };
    w.paged = [n](MultiGpuSpace& s, const auto& o) {
      const unsigned blocks = prepare_gemm<shared_array<float>>(s.gpus(), n, n, n);
      s.launch(gemm_kernel<shared_array<float>>, dim3(blocks), dim3(gemm_threads), gemm_shared_bytes, as<float>(o[0].on(0)),
               as<float>(o[1].on(0)), as<float>(o[2].on(0)), n, n, n);
    };
  } else if (name == "pagerank") {
    const auto [graph, offsets] = rmat_objects(w, bytes, 2);
    const std::uint64_t v = graph.vertices();
    w.objects[2].assign(v, 0);
    auto* x = reinterpret_cast<float*>(w.objects[2].data());
    for (std::uint64_t i = 0; i < v; ++i) x[i] = offsets[i + 1] > offsets[i] ? 1.0f / v / (offsets[i + 1] - offsets[i]) : 1.0f / v;
    w.objects[3].assign(v, 0);
    w.output = 2 + iterations % 2;
    w.read_only = {0, 1};  // the graph; both rank arrays are written (swapped every iteration)
    w.useful_bytes = iterations * (graph.csr_bytes() + 2 * v * 4 + graph.directed_edges() * 4);
    w.raw = [v](const auto& p, const auto& streams, unsigned G, Copies) {
      for (unsigned it = 0; it < iterations; ++it) {
        for (unsigned g = 0; g < G; ++g) {
          check(cudaSetDevice(g), "cudaSetDevice");
          pagerank_kernel<<<1056, 256, 0, streams[g]>>>(raw_of<std::uint64_t>(p[g][0], 2 * (v + 1), g, G),
                                                        raw_of<std::uint32_t>(p[g][1], 0, g, G),
                                                        raw_of<float>(p[g][2 + it % 2], v, g, G),
                                                        raw_of<float>(p[g][2 + (it + 1) % 2], v, g, G), v);
        }
        for (unsigned g = 0; g < G; ++g) check(cudaStreamSynchronize(streams[g]), "pagerank iteration");
      }
    };
    w.paged = [v](MultiGpuSpace& s, const auto& o) {
      for (unsigned it = 0; it < iterations; ++it)
        s.launch(pagerank_kernel<shared_array<std::uint64_t>, shared_array<std::uint32_t>, shared_array<float>>, dim3(1056),
                 dim3(256), 0, as<std::uint64_t>(o[0].on(0)), o[1].on(0), as<float>(o[2 + it % 2].on(0)),
                 as<float>(o[2 + (it + 1) % 2].on(0)), v);
    };
  } else if (name == "bfs") {
    // Objects: row offsets and column indices (read by every GPU: duplication's case) and depth
    // (claimed by every GPU with compare_exchange: access-counter's case); scaled by --bytes as
    // pagerank is, with one vertex array instead of two.
    const auto [graph, offsets] = rmat_objects(w, bytes, 1);
    const std::uint64_t v = graph.vertices();
    // The root: the vertex of highest degree (the least such id), so that the search reaches
    // R-MAT's giant component.
    std::uint32_t root = 0;
    for (std::uint64_t u = 1; u < v; ++u)
      if (offsets[u + 1] - offsets[u] > offsets[root + 1] - offsets[root]) root = static_cast<std::uint32_t>(u);
    w.objects[2].assign(v, workloads::bfs_unreached);
    w.objects[2][root] = 0;
    w.output = 2;
    w.read_only = {0, 1};  // the graph; depth is claimed into
    // The CPU reference (rmat.hpp's reference_bfs, independent of the kernels).
    std::vector<std::uint32_t> levels = workloads::reference_bfs(offsets, w.objects[1], root, parallel_for);
    std::uint32_t deepest = 0;
    std::uint64_t reached = 0;
    for (const std::uint32_t d : levels)
      if (d != workloads::bfs_unreached) {
        deepest = std::max(deepest, d);
        ++reached;
      }
    std::fprintf(stderr, "bfs: R-MAT scale %u, root %u, %llu of %llu vertices reached, %u levels\n", graph.scale, root,
                 static_cast<unsigned long long>(reached), static_cast<unsigned long long>(v), deepest + 1);
    // The graph once, and depth once per launch (deepest + 1 levels, the last claiming nothing).
    w.useful_bytes = graph.csr_bytes() + (std::uint64_t{deepest} + 1) * v * 4;
    w.check_reference = [levels = std::move(levels)](const std::vector<std::vector<std::uint32_t>>&,
                                                     const std::vector<std::uint32_t>& output) -> std::string {
      for (std::uint64_t u = 0; u < levels.size(); ++u)
        if (output[u] != levels[u])
          return "bfs: depth[" + std::to_string(u) + "] = " + std::to_string(output[u]) + ", CPU BFS " + std::to_string(levels[u]);
      return {};
    };
    w.raw = [v, reached_word = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      run_bfs_levels(reached_word, [&](std::uint32_t level) {
        for (unsigned g = 0; g < G; ++g) {
          check(cudaSetDevice(g), "cudaSetDevice");
          // Depth: the first GPU's copy for every GPU (see the file comment).
          bfs_level_kernel<<<1056, 256, 0, streams[g]>>>(raw_of<std::uint64_t>(p[g][0], 2 * (v + 1), g, G),
                                                         raw_of<std::uint32_t>(p[g][1], 0, g, G),
                                                         raw_of<std::uint32_t>(p[0][2], v, g, G), v, level, reached_word);
          check(cudaGetLastError(), "bfs level launch");
        }
        for (unsigned g = 0; g < G; ++g) check(cudaStreamSynchronize(streams[g]), "bfs level");
      });
    };
    w.paged = [v, reached_word = device_word](MultiGpuSpace& s, const auto& o) {
      run_bfs_levels(reached_word, [&](std::uint32_t level) {
        s.launch(bfs_level_kernel<shared_array<std::uint64_t>, shared_array<std::uint32_t>, shared_array<std::uint32_t>>,
                 dim3(1056), dim3(256), 0, as<std::uint64_t>(o[0].on(0)), o[1].on(0), o[2].on(0), v, level, reached_word);
        s.synchronize();
      });
    };
  } else if (name == "im2col" || name == "conv2d") {
    // conv2d: im2col, GEMM (filters x col), transpose to pixel-major: three explicit phases, the
    // objects' patterns changing between them (col: private writes, then shared reads; out:
    // written by several GPUs per page, then shared reads). im2col alone is its first phase.
    const bool conv = name == "conv2d";
    // Sides: multiples of 16 for conv2d (its GEMM's n, height x width, a multiple of the 256-column
    // tile), of 8 for im2col (as before: its shapes unchanged).
    const ConvShape c = conv ? ConvShape::at_least(bytes, 10 * conv_channels + 2 * conv_filters, conv_filters * 9 * conv_channels, 16)
                             : ConvShape::at_least(bytes, 10 * conv_channels, 0, 8);
    const std::uint64_t hw = c.pixels(), taps = c.taps(), k = c.filters;
    w.objects.resize(conv ? 5 : 2);
    w.objects[0].resize(c.channels * hw);  // the image
    fill_small_floats(w.objects[0], 21);
    if (conv) {
      w.objects[1].resize(k * taps);  // the filters
      fill_small_floats(w.objects[1], 22);
      w.objects[2].assign(taps * hw, 0);  // col
      w.objects[3].assign(k * hw, 0);     // out, filter-major
      w.objects[4].assign(hw * k, 0);     // the result, pixel-major
    } else {
      w.objects[1].assign(taps * hw, 0);  // col
    }
    w.output = conv ? 4 : 1;
    w.read_only = conv ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{0};  // the image (and the filters)
    w.useful_bytes = 4 * (c.channels * hw + taps * hw) + (conv ? 4 * (k * taps + taps * hw + k * hw) + 2 * 4 * k * hw : 0);
    const auto channels = static_cast<std::uint32_t>(c.channels), height = static_cast<std::uint32_t>(c.height),
               width = static_cast<std::uint32_t>(c.width);
    w.raw = [=](const auto& p, const auto& streams, unsigned G, Copies copies) {
      // Stream order separates the phases on each GPU, all the order its own copies need. On one
      // shared copy a phase reads what other GPUs wrote in the one before (GEMM reads every row
      // of col, the transpose other GPUs' tiles of out), so every GPU finishes a phase before
      // any starts the next (as the paged form's launches do).
      const auto each_gpu = [&](const auto& launch) {
        for (unsigned g = 0; g < G; ++g) {
          check(cudaSetDevice(g), "cudaSetDevice");
          launch(g);
        }
      };
      const auto phase_boundary = [&] {
        if (copies == Copies::shared)
          for (unsigned g = 0; g < G; ++g) check(cudaStreamSynchronize(streams[g]), "conv2d phase");
      };
      const auto col = [&](unsigned g) { return raw_of<float>(p[g][conv ? 2 : 1], taps * hw, g, G); };
      const auto out = [&](unsigned g) { return raw_of<float>(p[g][3], k * hw, g, G); };
      each_gpu([&](unsigned g) {
        im2col_kernel<<<1056, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<float>(p[g][0], c.channels * hw, g, G), col(g), channels, height, width);
      });
      if (!conv) return;
      phase_boundary();
      const unsigned gemm_blocks = prepare_gemm<Raw<float>>(G, k, hw, taps);
      each_gpu([&](unsigned g) {
        gemm_kernel<<<gemm_blocks, gemm_threads, gemm_shared_bytes, streams[g]>>>(raw_of<float>(p[g][1], k * taps, g, G), col(g),
                                                                                 out(g), k, hw, taps);
        check(cudaGetLastError(), "gemm launch");
      });
      phase_boundary();
      each_gpu([&](unsigned g) {
        transpose_kernel<<<1056, dim3(32, 8), 0, streams[g]>>>(out(g), raw_of<float>(p[g][4], hw * k, g, G), k, hw);
      });
    };
    // Host spot checks at 4096 sampled outputs: im2col exactly; conv2d against a direct
    // convolution in double, within taps x 2^-24 of the sum of the terms' magnitudes (the bound
    // of fp32 recursive summation: the GPU sums the 576 exact products, possibly fused, in order).
    w.check_reference = [=](const std::vector<std::vector<std::uint32_t>>& objects,
                            const std::vector<std::uint32_t>& output) -> std::string {
      const std::vector<std::uint32_t>& image = objects[0];
      const auto at = [](const std::vector<std::uint32_t>& words, std::uint64_t i) {
        float f;
        std::memcpy(&f, &words[i], sizeof f);
        return f;
      };
      const auto pixel_value = [&](std::uint64_t ch, std::uint64_t pixel, std::uint64_t tap) {
        const long long y = static_cast<long long>(pixel / width) + static_cast<long long>(tap / 3) - 1;
        const long long x = static_cast<long long>(pixel % width) + static_cast<long long>(tap % 3) - 1;
        if (y < 0 || y >= height || x < 0 || x >= width) return 0.0f;
        return at(image, ch * hw + static_cast<std::uint64_t>(y) * width + static_cast<std::uint64_t>(x));
      };
      for (std::uint64_t sample = 0; sample < 4096; ++sample) {
        const std::uint64_t i = workloads::mix64(sample + 99) % output.size();
        if (!conv) {
          const std::uint64_t row = i / hw, pixel = i % hw;
          if (at(output, i) != pixel_value(row / 9, pixel, row % 9)) return "im2col: col[" + std::to_string(i) + "] is wrong";
          continue;
        }
        const std::uint64_t pixel = i / k, filter = i % k;
        double sum = 0, magnitude = 0;
        for (std::uint64_t t = 0; t < taps; ++t) {
          const double term = static_cast<double>(at(objects[1], filter * taps + t)) * pixel_value(t / 9, pixel, t % 9);
          sum += term;
          magnitude += std::abs(term);
        }
        if (std::abs(at(output, i) - sum) > static_cast<double>(taps) * std::ldexp(1.0, -24) * magnitude)
          return "conv2d: y[" + std::to_string(i) + "] = " + std::to_string(at(output, i)) + ", direct convolution " +
                 std::to_string(sum);
      }
      return {};
    };
    w.paged = [=](MultiGpuSpace& s, const auto& o) {
      const auto col = as<float>(o[conv ? 2 : 1].on(0));
      s.launch(im2col_kernel<shared_array<float>, shared_array<float>>, dim3(1056), dim3(chunk_block_warps * 32), 0, as<float>(o[0].on(0)), col,
               channels, height, width);
      if (!conv) return;
      const auto out = as<float>(o[3].on(0));
      const unsigned gemm_blocks = prepare_gemm<shared_array<float>>(s.gpus(), k, hw, taps);
      s.launch(gemm_kernel<shared_array<float>>, dim3(gemm_blocks), dim3(gemm_threads), gemm_shared_bytes, as<float>(o[1].on(0)),
               col, out, k, hw, taps);
      s.launch(transpose_kernel<shared_array<float>>, dim3(1056), dim3(32, 8), 0, out, as<float>(o[4].on(0)), k, hw);
    };
  } else {
    usage("unknown workload " + name);
  }
  return w;
}

/// True when `footprint` fits in what each of the first `gpus` GPUs has free (fits_on_device's
/// margin included); else says why on stderr. The uvm modes run in core only: oversubscribed
/// managed memory can hang a GPU, and one GPU may end up holding every page.
bool fits_on_every_gpu(unsigned gpus, const std::string& mode, std::uint64_t footprint) {
  bool fits = true;
  for (unsigned g = 0; g < gpus && fits; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    fits = fits_on_device(("warpvm-placement-bench: GPU " + std::to_string(g)).c_str(), mode, footprint);
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  if (!fits)
    std::fprintf(stderr, "warpvm-placement-bench: the uvm modes run in core only (never oversubscribed); lower --bytes\n");
  return fits;
}

/// Gives the driver a uvm mode's advice on the managed objects (after each fill: advice is sticky,
/// so this only repeats it; the fill's host writes have collapsed any read-duplicated copies).
void advise(const Workload& w, const std::vector<std::unique_ptr<Managed>>& objects, UvmAdvice advice, unsigned gpus) {
  if (advice == UvmAdvice::read_mostly)
    for (const std::size_t i : w.read_only)
      // The location is ignored for ReadMostly.
      check(cudaMemAdvise(objects[i]->as<void>(), objects[i]->bytes(), cudaMemAdviseSetReadMostly,
                          cudaMemLocation{cudaMemLocationTypeDevice, 0}),
            "cudaMemAdvise(SetReadMostly)");
  if (advice == UvmAdvice::accessed_by)
    for (const auto& o : objects)
      for (unsigned g = 0; g < gpus; ++g)
        check(cudaMemAdvise(o->as<void>(), o->bytes(), cudaMemAdviseSetAccessedBy,
                            cudaMemLocation{cudaMemLocationTypeDevice, static_cast<int>(g)}),
              "cudaMemAdvise(SetAccessedBy)");
}

/// Makes GPU 0's stream wait for every other GPU's, so that events on it time the whole phase.
void join_streams(const std::vector<cudaStream_t>& streams, const std::vector<cudaEvent_t>& events) {
  for (std::size_t g = 1; g < streams.size(); ++g) {
    check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
    check(cudaEventRecord(events[g], streams[g]), "cudaEventRecord");
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamWaitEvent(streams[0], events[g], 0), "cudaStreamWaitEvent");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
}

/// Each GPU's frame pool in the paged modes. In core (fraction 1): the footprint plus slack, as
/// before --cache-fraction. Oversubscribed: fraction x footprint in whole pages, but at least two
/// frames per warp that can be resident on the smallest of the GPUs: these kernels' warps hold
/// one page at a time (pagerank two: a rank read inside an adjacency span), so at any moment at
/// least half the frames are not held and an eviction's clock finds a victim within a few steps.
std::uint64_t pool_bytes_per_gpu(double fraction, std::uint64_t footprint, std::uint64_t page_bytes, unsigned gpus) {
  if (fraction >= 1) return footprint + footprint / 8 + (64ull << 20);
  std::uint64_t resident_warps = ~std::uint64_t{0};
  for (unsigned g = 0; g < gpus; ++g) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, static_cast<int>(g)), "cudaGetDeviceProperties");
    resident_warps = std::min<std::uint64_t>(resident_warps, std::uint64_t(prop.multiProcessorCount) *
                                                                 static_cast<std::uint64_t>(prop.maxThreadsPerMultiProcessor) / 32);
  }
  const auto share = static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(footprint) / static_cast<double>(page_bytes)));
  const std::uint64_t frames = std::max({share, 2 * resident_warps, std::uint64_t{detail::mg::min_pool_frames}});
  return frames * page_bytes;
}

void add_stats(Record& r, const GpuPlacementStats& s, double runs) {
  const auto put = [&](const char* k, std::uint64_t v) { r.extra[k] = static_cast<double>(v) / runs; };
  put("local_accesses", s.local_accesses);
  put("remote_accesses", s.remote_accesses);
  put("first_touches", s.first_touches);
  put("shared_faults", s.shared_faults);
  put("migrations", s.migrations);
  put("counter_migrations", s.counter_migrations);
  put("replications", s.replications);
  put("collapses", s.collapses);
  put("remote_maps", s.remote_maps);
  put("invalidations", s.invalidations);
  put("aborted_transitions", s.aborted_transitions);
  put("nvlink_bytes", s.nvlink_bytes);
  put("pcie_bytes", s.pcie_bytes);
  put("evictions", s.evictions);
  put("writebacks", s.writebacks);  // the timed runs do not flush: these are the evictions' write-backs
  r.faults = static_cast<std::int64_t>((s.first_touches + s.shared_faults) / runs);
  r.bytes_moved = static_cast<std::int64_t>((s.nvlink_bytes + s.pcie_bytes) / runs);
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Recorder recorder(a.out);
  int mismatches = 0;
  int visible = 0;
  check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  for (const unsigned G : a.gpus) {
    if (G < 1 || static_cast<int>(G) > visible) usage("--gpus " + std::to_string(G) + ": only " + std::to_string(visible) + " visible");
    std::vector<cudaStream_t> streams(G);
    std::vector<cudaEvent_t> events(G);
    for (unsigned g = 0; g < G; ++g) {
      check(cudaSetDevice(g), "cudaSetDevice");
      for (unsigned h = 0; h < G; ++h)
        if (h != g) detail::enable_peer_access(static_cast<int>(g), static_cast<int>(h), "warpvm-placement-bench");
      check(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&events[g], cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaSetDevice(0), "cudaSetDevice");
    DeviceBuffer<unsigned> device_word(1);
    for (const std::string& name : a.workloads) {
      std::fprintf(stderr, "[%u GPUs] %s: generating %.2f GiB of input\n", G, name.c_str(), a.bytes / double(1ull << 30));
      const Workload w = make_workload(name, a.bytes, device_word.data);
      std::uint64_t footprint = 0;
      for (const auto& o : w.objects) footprint += o.size() * 4;
      // The reference: the same kernels on GPU 0 over plain device memory.
      std::fprintf(stderr, "[%u GPUs] %s: single-GPU reference\n", G, name.c_str());
      std::vector<std::uint32_t> reference(w.objects[w.output].size());
      {
        std::vector<std::unique_ptr<DeviceBuffer<std::uint32_t>>> bufs;
        std::vector<std::vector<std::uint32_t*>> ptrs(1);
        for (const auto& o : w.objects) {
          bufs.push_back(std::make_unique<DeviceBuffer<std::uint32_t>>(o.size()));
          check(cudaMemcpy(bufs.back()->data, o.data(), o.size() * 4, cudaMemcpyHostToDevice), "upload");
          ptrs[0].push_back(bufs.back()->data);
        }
        w.raw(ptrs, {streams[0]}, 1, Copies::per_gpu);
        check(cudaSetDevice(0), "cudaSetDevice");
        check(cudaStreamSynchronize(streams[0]), "reference run");
        check(cudaMemcpy(reference.data(), ptrs[0][w.output], reference.size() * 4, cudaMemcpyDeviceToHost), "download");
      }
      if (w.check_reference) {
        const std::string wrong = w.check_reference(w.objects, reference);
        if (!wrong.empty()) throw std::runtime_error("the single-GPU reference is wrong: " + wrong);
      }
      // A coherent mode's result (on the host) against the reference; a mismatch is said and counted.
      const auto verify = [&](Record& r, const std::uint32_t* output) {
        r.verified = std::memcmp(output, reference.data(), reference.size() * 4) == 0;
        if (r.verified) return;
        std::fprintf(stderr, "[%u GPUs] %s: %s: MISMATCH against the single-GPU reference\n", G, name.c_str(), r.mode.c_str());
        mismatches += 1;
      };
      for (const std::string& mode : a.out.modes)
      for (const std::uint32_t reset_threshold :
           mode == "oasis" ? a.reset_thresholds : std::vector<std::uint32_t>{detail::default_reset_threshold}) {
        std::fprintf(stderr, "[%u GPUs] %s: %s (reset threshold %u)\n", G, name.c_str(), mode.c_str(), reset_threshold);
        Record r;
        r.workload = name;
        r.mode = mode;
        // The sensitivity runs are points of their own (reports key points by policy).
        r.policy = reset_threshold == detail::default_reset_threshold ? mode : mode + "_reset" + std::to_string(reset_threshold);
        r.cache_fraction = 1.0;
        r.dataset_bytes = footprint;
        r.useful_bytes = w.useful_bytes;
        r.extra["gpus"] = G;
        // --bytes, the scaling point (each shape lands near it), in MiB: extras print 9 digits.
        r.extra["requested_mib"] = static_cast<double>(a.bytes) / (1 << 20);
        if (mode == "ideal") {
          std::vector<std::vector<std::unique_ptr<DeviceBuffer<std::uint32_t>>>> bufs(G);
          std::vector<std::vector<std::uint32_t*>> ptrs(G);
          const auto upload = [&] {
            for (unsigned g = 0; g < G; ++g)
              for (std::size_t i = 0; i < w.objects.size(); ++i)
                check(cudaMemcpy(ptrs[g][i], w.objects[i].data(), w.objects[i].size() * 4, cudaMemcpyHostToDevice), "upload");
          };
          for (unsigned g = 0; g < G; ++g) {
            check(cudaSetDevice(g), "cudaSetDevice");
            for (const auto& o : w.objects) {
              bufs[g].push_back(std::make_unique<DeviceBuffer<std::uint32_t>>(o.size()));
              ptrs[g].push_back(bufs[g].back()->data);
            }
          }
          check(cudaSetDevice(0), "cudaSetDevice");
          r.seconds = time_runs(streams[0], a.out.repeats, upload, [&] {
            w.raw(ptrs, streams, G, Copies::per_gpu);
            join_streams(streams, events);
          });
          r.verified = false;  // a bound, not a coherent program (see the file comment)
          r.extra["ideal_bound"] = 1;
        } else if (const std::optional<UvmAdvice> advice = uvm_advice_of(mode)) {
          if (a.initial_spread) {
            std::fprintf(stderr, "[%u GPUs] %s: %s skipped: --initial-placement applies to the paged modes only\n", G,
                         name.c_str(), mode.c_str());
            continue;
          }
          if (!fits_on_every_gpu(G, mode, footprint)) continue;
          // Each object allocated once; every GPU's pointers are the same managed ones.
          std::vector<std::unique_ptr<Managed>> managed;
          std::vector<std::uint32_t*> one_copy;
          for (const auto& o : w.objects) {
            managed.push_back(std::make_unique<Managed>(o.size() * 4));
            one_copy.push_back(managed.back()->as<std::uint32_t>());
          }
          const std::vector<std::vector<std::uint32_t*>> ptrs(G, one_copy);
          const auto fill = [&] {
            for (std::size_t i = 0; i < w.objects.size(); ++i) managed[i]->assign(w.objects[i].data());
            advise(w, managed, *advice, G);
          };
          const auto run_once = [&] {
            w.raw(ptrs, streams, G, Copies::shared);
            join_streams(streams, events);
          };
          r.seconds = time_runs(streams[0], a.out.repeats, fill, run_once);
          // time_runs waited for the last run (every GPU's stream joins the first's).
          verify(r, managed[w.output]->as<std::uint32_t>());
          add_uvm_traffic(r, fill, run_once, a.out.uvm_counted_runs);
        } else {
          MultiGpuConfig config;
          for (unsigned g = 0; g < G; ++g) config.devices.push_back(static_cast<int>(g));
          config.frame_bytes_per_gpu = pool_bytes_per_gpu(a.cache_fraction, footprint, a.page_bytes, G);
          if (a.cache_fraction < 1) {
            r.cache_fraction = static_cast<double>(config.frame_bytes_per_gpu) / static_cast<double>(footprint);
            if (r.cache_fraction >= 1)
              std::fprintf(stderr, "[%u GPUs] %s: the pool floor (two frames per resident warp) holds the footprint: in core\n", G,
                           name.c_str());
          }
          config.default_policy = policy_of(mode);
          config.reset_threshold = reset_threshold;
          config.counter_threshold = a.counter_threshold;
          config.page_bytes = a.page_bytes;
          r.extra["page_bytes"] = static_cast<double>(a.page_bytes);
          if (a.page_bytes != MultiGpuConfig{}.page_bytes) r.policy += "_page" + std::to_string(a.page_bytes);
          r.policy += cli::initial_placement_suffix(a.initial_spread);
          r.extra["reset_threshold"] = reset_threshold;
          r.extra["counter_threshold"] = a.counter_threshold;
          MultiGpuSpace space(config);
          std::vector<shared_object<std::uint32_t>> objs;
          for (std::size_t i = 0; i < w.objects.size(); ++i)
            objs.push_back(space.alloc<std::uint32_t>(w.objects[i].size(), std::nullopt, name + "." + std::to_string(i)));
          std::vector<cudaStream_t> space_streams(G);
          for (unsigned g = 0; g < G; ++g) space_streams[g] = space.stream(g);
          const auto reset = [&] {
            space.drop_cached();
            for (std::size_t i = 0; i < objs.size(); ++i)
              std::memcpy(objs[i].host().data(), w.objects[i].data(), w.objects[i].size() * 4);
            if (a.initial_spread)
              for (const auto& o : objs) space.place_on_gpus(o, *a.initial_spread);
            space.reset_stats();
          };
          GpuPlacementStats sum;
          r.seconds = time_runs(space_streams[0], a.out.repeats, reset, [&] {
            w.paged(space, objs);
            join_streams(space_streams, events);
          });
          // time_runs' last run is the one whose counters are left: one run's worth.
          sum = space.stats().total();
          space.flush();
          verify(r, objs[w.output].host().data());
          add_stats(r, sum, 1.0);
          if (a.barrier_times && w.barrier_rounds > 0) {
            reset();
            print_barrier_rounds(r.workload + " " + r.policy, device_word.data, w.barrier_rounds, space,
                                 [&] { w.paged(space, objs); });
            space.flush();  // raises the run's device failures; its result is checked as the timed runs' were
            verify(r, objs[w.output].host().data());
          }
        }
        recorder.write(r);
      }
    }
    for (unsigned g = 0; g < G; ++g) {
      check(cudaSetDevice(g), "cudaSetDevice");
      cudaStreamDestroy(streams[g]);
      cudaEventDestroy(events[g]);
    }
    check(cudaSetDevice(0), "cudaSetDevice");
  }
  return mismatches == 0 ? 0 : 1;
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  try {
    return warpvm::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-placement-bench: %s\n", e.what());
    return 1;
  }
}
