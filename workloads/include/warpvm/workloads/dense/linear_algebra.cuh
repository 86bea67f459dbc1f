#pragma once
// Polybench's MVT, ATAX and BICG on the GPU: linear algebra that reads an N x N row-major float
// matrix A twice, once along its rows and once down its columns. Two kernels make all three:
//  - row product     out[i] += sum_j A[i][j] v[j], as PolyBench/GPU writes it: each thread walks
//    its own row left to right, so at every step the 32 lanes of a warp read 32 different rows,
//    N x 4 bytes apart (32 pages at once);
//  - column product  out[j] += sum_i A[i][j] w[i], in one of two forms (ColumnProduct):
//    - tiles (the default): a warp sums 256 neighbouring columns over 32 rows (column_tiles.hpp),
//      each lane 8 columns 32 apart, reading 1 KiB of a row per step, the strips of columns
//      taken from the right, where the row product left its last pages; one atomic add per column
//      and tile;
//    - bands: PolyBench's thread per column, over one band of rows (the rows cut into `bands`
//      equal runs, each thread adding its partial sum atomically); a warp reads one 128-byte
//      piece of a row per step and then jumps a whole row ahead. PolyBench has one band: n
//      threads, a few warps per SM, each waiting on one load (or one page fault) at a time;
//      bands x n threads keep enough of them in flight (linear_column_bands).
// MVT: x1 += A y1, x2 += A^T y2. ATAX: tmp = A x, then y = A^T tmp. BICG: q = A p, s = A^T r.
// Each kernel in two versions of one loop: plain pointers (device, pinned host or managed memory)
// and warpvm::array<float> (the row product and the tiles through a cursor per thread, which
// keeps its current page; the bands through element access, a new page every step).
//
// Exact results: A's entries and the vectors' are small integers (1..16), the vectors and sums
// are doubles, so every product and partial sum is an integer below 2^53 (N <= linear_max_n) and
// the GPU's sums equal the CPU reference's bit for bit, in any order of summation.
// Used by warpvm-apps-bench and the GPU tests (tests/workloads/apps_test.cu); docs/bench/apps.md
// describes the workloads.

#include "warpvm/workloads/dense/column_tiles.hpp"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::workloads {

/// Threads per block of the matrix kernels.
inline constexpr unsigned linear_block_threads = 256;
/// Pages a thread of the paged kernels holds at once: the row product's and the column tiles'
/// cursor, or the column bands' one element access (Config::max_pages_held_per_thread).
inline constexpr std::uint32_t linear_pages_held = 1;
/// Largest N with exact sums: ATAX's y reaches 16 x N x (16 + 256 N) < 2^53.
inline constexpr std::uint64_t linear_max_n = 1u << 20;

enum class LinearApp : std::uint8_t { mvt, atax, bicg };

/// The column product's form (see the file comment).
enum class ColumnProduct : std::uint8_t { tiles, bands };

inline const char* to_string(ColumnProduct form) { return form == ColumnProduct::tiles ? "tiles" : "bands"; }

inline const char* to_string(LinearApp app) {
  switch (app) {
    case LinearApp::mvt: return "mvt";
    case LinearApp::atax: return "atax";
    default: return "bicg";
  }
}

/// ATAX's column product reads the row product's result (y = A^T (A x)); MVT's and BICG's read
/// a vector of their own.
constexpr bool column_reads_row_result(LinearApp app) { return app == LinearApp::atax; }

namespace linear_detail {

__device__ inline std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ inline std::uint64_t thread_count() { return std::uint64_t{gridDim.x} * blockDim.x; }

/// sum_k at(first + k * stride) * v[k] over k < n, four matrix loads issued before any is used so
/// that their latencies overlap (the compiler does not hoist loads across warpvm's page checks,
/// whose slow paths are branches).
template <class At>
__device__ double dot(At&& at, std::uint64_t first, std::uint64_t stride, std::uint64_t n, const double* v) {
  constexpr unsigned ilp = 4;
  double sum = 0;
  std::uint64_t k = 0;
  for (; k + ilp <= n; k += ilp) {
    float a[ilp];
#pragma unroll
    for (unsigned u = 0; u < ilp; ++u) a[u] = at(first + (k + u) * stride);
#pragma unroll
    for (unsigned u = 0; u < ilp; ++u) sum += static_cast<double>(a[u]) * v[k + u];
  }
  for (; k < n; ++k) sum += static_cast<double>(at(first + k * stride)) * v[k];
  return sum;
}

}  // namespace linear_detail

/// out[i] += (A v)[i] for the rows i of this thread (grid-stride).
__global__ void row_product_raw(const float* a, std::uint64_t n, const double* v, double* out) {
  for (std::uint64_t i = linear_detail::thread_index(); i < n; i += linear_detail::thread_count())
    out[i] += linear_detail::dot([&](std::uint64_t k) { return a[k]; }, i * n, 1, n, v);
}

namespace linear_detail {
/// out[j] += (A^T w)[j]: thread t of n x bands (grid-stride) takes column t % n over the rows of
/// band t / n and adds its partial sum atomically (exact: integer sums, see the file comment).
/// Neighbouring threads take neighbouring columns of one band, so a warp's reads stay coalesced.
template <class At>
__device__ void column_bands(At&& at, std::uint64_t n, std::uint64_t bands, const double* w, double* out) {
  const std::uint64_t rows_per_band = (n + bands - 1) / bands;
  for (std::uint64_t t = thread_index(); t < n * bands; t += thread_count()) {
    const std::uint64_t j = t % n;
    const std::uint64_t first_row = t / n * rows_per_band;
    if (first_row >= n) continue;
    const std::uint64_t rows = rows_per_band < n - first_row ? rows_per_band : n - first_row;
    atomicAdd(&out[j], dot(at, first_row * n + j, n, rows, w + first_row));
  }
}

/// out[j] += (A^T w)[j] by the warp tiles of ColumnTiling, grid-stride over them in its order:
/// each lane sums column_tile_lane_columns columns of its warp's tile, 32 apart, with a row's
/// loads all issued before any is used, and adds each sum atomically once per tile (exact:
/// integer sums). Needs blocks of whole warps.
template <class At>
__device__ void column_tiles(At&& at, std::uint64_t n, const double* w, double* out) {
  constexpr std::uint32_t columns = column_tile_lane_columns;
  const ColumnTiling tiling{n};
  const std::uint64_t warps = thread_count() / 32;
  for (std::uint64_t t = thread_index() / 32; t < tiling.count(); t += warps) {
    const ColumnTile tile = tiling.tile(t);
    const std::uint64_t first_column = tile.first_column + detail::lane_id();
    double sum[columns] = {};
    for (std::uint64_t i = tile.first_row; i < tile.end_row; ++i) {
      float a[columns];
#pragma unroll
      for (std::uint32_t u = 0; u < columns; ++u) {
        const std::uint64_t j = first_column + 32 * u;
        a[u] = j < n ? at(i * n + j) : 0.0f;
      }
      const double wi = w[i];
#pragma unroll
      for (std::uint32_t u = 0; u < columns; ++u) sum[u] += static_cast<double>(a[u]) * wi;
    }
#pragma unroll
    for (std::uint32_t u = 0; u < columns; ++u) {
      const std::uint64_t j = first_column + 32 * u;
      if (j < n) atomicAdd(&out[j], sum[u]);
    }
  }
}
}  // namespace linear_detail

/// out += A^T w by warp tiles (ColumnTiling).
__global__ void column_tiles_raw(const float* a, std::uint64_t n, const double* w, double* out) {
  linear_detail::column_tiles([&](std::uint64_t k) { return a[k]; }, n, w, out);
}

/// out += A^T w over `bands` bands of rows (linear_column_bands).
__global__ void column_bands_raw(const float* a, std::uint64_t n, std::uint64_t bands, const double* w, double* out) {
  linear_detail::column_bands([&](std::uint64_t k) { return a[k]; }, n, bands, w, out);
}

__global__ void row_product_paged(array<float> a, std::uint64_t n, const double* v, double* out) {
  cursor<float> row(a);
  for (std::uint64_t i = linear_detail::thread_index(); i < n; i += linear_detail::thread_count())
    out[i] += linear_detail::dot([&](std::uint64_t k) { return row[k]; }, i * n, 1, n, v);
}

__global__ void column_bands_paged(array<float> a, std::uint64_t n, std::uint64_t bands, const double* w, double* out) {
  linear_detail::column_bands([&](std::uint64_t k) { return a[k]; }, n, bands, w, out);
}

__global__ void column_tiles_paged(array<float> a, std::uint64_t n, const double* w, double* out) {
  cursor<float> tile_row(a);
  linear_detail::column_tiles([&](std::uint64_t k) { return tile_row[k]; }, n, w, out);
}

/// Blocks of linear_block_threads for one thread per element of `threads` (the row product: n;
/// the banded column product: n x bands; the tiled one: 32 per tile), at most `max_blocks`.
inline unsigned linear_grid(std::uint64_t threads, std::uint64_t max_blocks) {
  const std::uint64_t wanted = (threads + linear_block_threads - 1) / linear_block_threads;
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(wanted, max_blocks)));
}

/// Threads the tiled column product has work for: a warp per tile.
inline std::uint64_t column_tiles_threads(std::uint64_t n) { return ColumnTiling{n}.count() * 32; }

/// The tiled column product's grid on a GPU of `multiprocessors`: no more blocks of `kernel` than
/// are resident at once, so that the grid-stride loop walks the tiles in waves, in their order.
/// A larger grid runs its later blocks only after the first ones have swept the whole matrix,
/// each page's tiles far apart in time: at 25% cache that moved A twice in the column pass alone.
template <class Kernel>
unsigned column_tiles_grid(Kernel kernel, std::uint64_t n, std::uint64_t multiprocessors) {
  int per_multiprocessor = 0;
  const cudaError_t status =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, linear_block_threads, 0);
  if (status != cudaSuccess || per_multiprocessor < 1)
    throw std::runtime_error(std::string("column tiles: cannot tell the kernel's occupancy: ") +
                             cudaGetErrorString(status));
  return linear_grid(column_tiles_threads(n),
                     static_cast<std::uint64_t>(per_multiprocessor) * multiprocessors);
}

/// Bands of rows the banded column product cuts A into on a GPU of `multiprocessors`: enough that
/// bands x n threads could fill every SM (2048 threads each), at least 1, at most n.
inline std::uint64_t linear_column_bands(std::uint64_t n, std::uint64_t multiprocessors) {
  const std::uint64_t wanted = (multiprocessors * 2048 + n - 1) / n;
  return std::max<std::uint64_t>(1, std::min(wanted, n));
}

/// One application's two kernels on `stream`: the row product into out1, then the column
/// product into out2 (reading out1 for ATAX). `row` and `column` launch one kernel each,
/// given (input vector, output vector).
template <class LaunchRow, class LaunchColumn>
void run_linear(LinearApp app, const double* row_input, const double* column_input, double* out1, double* out2,
                LaunchRow&& row, LaunchColumn&& column) {
  row(row_input, out1);
  column(column_reads_row_result(app) ? out1 : column_input, out2);
}

/// Entry k of a matrix or vector drawn from `seed`: an integer in 1..16 (exact as a float).
inline std::uint32_t linear_entry(std::uint64_t seed, std::uint64_t k) {
  return 1 + static_cast<std::uint32_t>(workloads::mix64(workloads::mix64(seed) + k) >> 60);
}

/// The vectors of one application of size n (from `seed`): inputs, and the outputs' initial
/// values (MVT's x1 and x2 start non-zero; ATAX's and BICG's outputs start at zero, as in
/// Polybench).
struct LinearVectors {
  std::vector<double> row_input;     ///< MVT y1, ATAX x, BICG p
  std::vector<double> column_input;  ///< MVT y2, BICG r; unused by ATAX (it reads tmp)
  std::vector<double> row_init;      ///< MVT x1, ATAX tmp, BICG q before the kernels
  std::vector<double> column_init;   ///< MVT x2, ATAX y, BICG s before the kernels

  LinearVectors(LinearApp app, std::uint64_t n, std::uint64_t seed)
      : row_input(random(n, seed + 1)),
        column_input(random(n, seed + 2)),
        row_init(app == LinearApp::mvt ? random(n, seed + 3) : std::vector<double>(n, 0.0)),
        column_init(app == LinearApp::mvt ? random(n, seed + 4) : std::vector<double>(n, 0.0)) {}

 private:
  static std::vector<double> random(std::uint64_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    for (std::uint64_t i = 0; i < n; ++i) v[i] = linear_entry(seed, i);
    return v;
  }
};

/// Throws std::invalid_argument unless n is in [1, linear_max_n].
inline void validate_linear_size(std::uint64_t n) {
  if (n < 1 || n > linear_max_n)
    throw std::invalid_argument("matrix size " + std::to_string(n) + " is outside 1.." + std::to_string(linear_max_n) +
                                " (larger sums would not be exact in double)");
}

/// Fills the n x n matrix `a` from `seed`, rows split over `pfor(n, body(begin, end))`.
template <class ParallelFor = workloads::SerialFor>
void fill_matrix(float* a, std::uint64_t n, std::uint64_t seed, ParallelFor&& pfor = {}) {
  pfor(n, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t k = begin * n; k < end * n; ++k) a[k] = static_cast<float>(linear_entry(seed, k));
  });
}

/// The reference results of `app` on the host: out1 (the row product's vector) and out2 (the
/// column product's), exact (see the file comment). Work split over pfor as fill_matrix.
struct LinearResult {
  std::vector<double> out1, out2;
};
template <class ParallelFor = workloads::SerialFor>
LinearResult reference_linear(LinearApp app, const float* a, std::uint64_t n, const LinearVectors& vectors,
                              ParallelFor&& pfor = {}) {
  LinearResult r{vectors.row_init, vectors.column_init};
  pfor(n, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) {
      double sum = 0;
      for (std::uint64_t j = 0; j < n; ++j) sum += static_cast<double>(a[i * n + j]) * vectors.row_input[j];
      r.out1[i] += sum;
    }
  });
  const std::vector<double>& w = column_reads_row_result(app) ? r.out1 : vectors.column_input;
  // Each worker owns a band of columns and sweeps every row over it: A is read in row order.
  pfor(n, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = 0; i < n; ++i)
      for (std::uint64_t j = begin; j < end; ++j) r.out2[j] += static_cast<double>(a[i * n + j]) * w[i];
  });
  return r;
}

/// "" when `got` equals `expected` exactly, else how many differ and the first difference.
inline std::string compare_vectors(const char* name, const std::vector<double>& got, const std::vector<double>& expected) {
  std::uint64_t wrong = 0, first = 0;
  for (std::uint64_t i = got.size(); i-- > 0;) {
    if (got[i] != expected[i]) {
      ++wrong;
      first = i;
    }
  }
  if (wrong == 0) return {};
  return std::string(name) + ": " + std::to_string(wrong) + " of " + std::to_string(got.size()) + " differ; [" +
         std::to_string(first) + "] = " + std::to_string(got[first]) + ", expected " + std::to_string(expected[first]);
}

}  // namespace warpvm::workloads
