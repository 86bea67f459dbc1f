#pragma once
// What the placement apps' kernels (dense_kernels.cuh, csr_kernels.cuh) share: Raw, the
// shared_array interface over plain memory (the single-GPU reference, the ideal bound and the
// real-UVM modes run the same kernels on it); the grid barrier across every GPU's blocks with
// the word it counts on; and a warp's runs of elements a page at a time, one hold (with_span) per
// page instead of one per element. Used by warpvm-placement-bench (docs/placement.md).

#include "warpvm/warpvm.hpp"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace warpvm::workloads::multi_gpu {

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

__device__ inline std::uint64_t tid() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }
__device__ inline std::uint64_t nthreads() { return std::uint64_t{gridDim.x} * blockDim.x; }

/// Blocks for `kernel` in blocks of `block` threads: as many as can be resident on `device`.
inline unsigned occupancy_blocks(const void* kernel, int block, int device, std::size_t shared_bytes = 0) {
  int per_sm = 0, sms = 0;
  WARPVM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, shared_bytes));
  WARPVM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(std::max(1, per_sm) * sms);
}

/// A barrier across every GPU's blocks (stencil2d's sweeps, fft's stages): `counter`, one word
/// that every GPU reaches (zero_device_word), counts the blocks' arrivals over all rounds.
__device__ inline void grid_barrier(unsigned* counter, unsigned total_blocks, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_system> c(*counter);
    c.fetch_add(1, cuda::std::memory_order_acq_rel);
    while (c.load(cuda::std::memory_order_acquire) < total_blocks * (round + 1)) __nanosleep(256);
  }
  __syncthreads();
}

/// Zeroes `word` (on the first GPU) and waits: the kernels that read it run on non-blocking
/// streams, which a memset on the legacy stream does not order.
inline void zero_device_word(unsigned* word) {
  WARPVM_CUDA_TRY(cudaSetDevice(0));
  WARPVM_CUDA_TRY(cudaMemset(word, 0, sizeof(unsigned)));
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
}

/// Elements a warp works on at a time in stencil2d, im2col and fft: it stages what they read in
/// shared memory, a page's piece of each run under one hold, and writes them a page's piece at a
/// time, instead of taking a hold per element access.
inline constexpr unsigned warp_chunk = 256;
inline constexpr unsigned chunk_block_warps = 8;  ///< warps per block of the chunked kernels

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

}  // namespace warpvm::workloads::multi_gpu
