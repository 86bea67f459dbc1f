#pragma once
// The placement apps' kernels over dense arrays, each GPU working on its share of the output:
// transpose (and transpose_flat, by flat address), stencil2d and fft (rounds inside one kernel,
// a grid barrier across every GPU's blocks between them), gemm (conv2d's middle phase too) and
// im2col (conv2d's first). Every kernel takes shared_array (the paged modes) or Raw (plain
// memory: the single-GPU reference, the ideal bound, the real-UVM modes); placement_workloads.cuh
// launches them.

#include "warpvm/workloads/multi_gpu/kernel_support.cuh"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace warpvm::workloads::multi_gpu {

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
template <class T>
__global__ void transpose_flat_kernel(flat_view flat, flat_address in, flat_address out, std::uint64_t rows,
                                      std::uint64_t cols) {
  transpose_tiles(Flat<T>{flat, in}, Flat<T>{flat, out}, rows, cols);
}

// ---- 2D stencil: sweeps inside one kernel, grids swapped, a barrier across every GPU's blocks ----
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
inline constexpr unsigned gemm_tile_rows = 64, gemm_tile_cols = 256, gemm_k_step = 64;
inline constexpr unsigned gemm_threads = 256, gemm_rows_per_warp = gemm_tile_rows / (gemm_threads / 32);
inline constexpr unsigned gemm_cols_per_lane = gemm_tile_cols / 32;
/// A's tile then B's (which holds C's tile after the last k step), above the 48 KB static limit.
inline constexpr std::size_t gemm_shared_bytes = (gemm_tile_rows + gemm_tile_cols) * gemm_k_step * sizeof(float);
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
    WARPVM_CUDA_TRY(cudaSetDevice(static_cast<int>(g)));
    WARPVM_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(gemm_shared_bytes)));
  }
  WARPVM_CUDA_TRY(cudaSetDevice(0));
  return occupancy_blocks(kernel, gemm_threads, 0, gemm_shared_bytes);
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

}  // namespace warpvm::workloads::multi_gpu
