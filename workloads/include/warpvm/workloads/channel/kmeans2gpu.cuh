#pragma once
// kmeans2gpu: k-means (integer points, 4 dimensions) over points split between two GPUs; every
// iteration each GPU produces its per-centroid partial sums for the other and consumes the
// other's. Host reference: kmeans_reference (the same integer arithmetic: exact on both sides).

#include "warpvm/workloads/channel/peer_exchange.cuh"

#include <cuda/atomic>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace warpvm::workloads {

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

/// What k-means ends with: the centroids of the last state ([k][4]) and how many points chose
/// each in the last iteration.
struct KmeansResult {
  std::vector<std::uint32_t> centroids;
  std::vector<unsigned long long> counts;
};

/// `iterations` of k-means over all points on the host, without the split in two; state 0 is the
/// first k points. The same integer arithmetic as kmeans2gpu_kernel (kmeans_nearest,
/// kmeans_mean), so the GPUs must match it exactly. `parallel_for(n, body)` runs body(first, end)
/// over a split of [0, n).
template <class ParallelFor>
KmeansResult kmeans_reference(const std::vector<uint4>& points, std::uint32_t k, std::uint32_t iterations,
                              ParallelFor&& parallel_for) {
  constexpr std::uint32_t per = kmeans_words_per_centroid;
  std::vector<uint4> centroids(points.begin(), points.begin() + k);
  std::vector<unsigned long long> totals(std::uint64_t{k} * per);
  std::mutex totals_lock;
  for (std::uint32_t i = 0; i < iterations; ++i) {
    std::fill(totals.begin(), totals.end(), 0ull);
    parallel_for(points.size(), [&](std::uint64_t first, std::uint64_t end) {
      std::vector<unsigned long long> sums(totals.size(), 0);
      for (std::uint64_t p = first; p < end; ++p) {
        const uint4 point = points[p];
        unsigned long long* to = sums.data() + std::uint64_t{kmeans_nearest(point, centroids.data(), k)} * per;
        to[0] += point.x;
        to[1] += point.y;
        to[2] += point.z;
        to[3] += point.w;
        to[4] += 1;
      }
      const std::lock_guard<std::mutex> hold(totals_lock);
      for (std::size_t w = 0; w < sums.size(); ++w) totals[w] += sums[w];
    });
    for (std::uint32_t c = 0; c < k; ++c) {
      const unsigned long long* sums = totals.data() + std::uint64_t{c} * per;
      uint4& centroid = centroids[c];
      centroid = make_uint4(kmeans_mean(sums[0], sums[4], centroid.x), kmeans_mean(sums[1], sums[4], centroid.y),
                            kmeans_mean(sums[2], sums[4], centroid.z), kmeans_mean(sums[3], sums[4], centroid.w));
    }
  }
  KmeansResult result;
  for (const uint4& c : centroids) result.centroids.insert(result.centroids.end(), {c.x, c.y, c.z, c.w});
  for (std::uint32_t c = 0; c < k; ++c) result.counts.push_back(totals[std::uint64_t{c} * per + kmeans_dims]);
  return result;
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
  /// the exchange: docs/bench/channel.md)
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
