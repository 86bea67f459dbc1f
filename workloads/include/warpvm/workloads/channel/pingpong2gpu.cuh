#pragma once
// pingpong2gpu: the latency of one GPU-to-GPU hand-off in each mode. One block per GPU; GPU 0
// sends message k, then waits for GPU 1's message k; GPU 1 waits for GPU 0's message k, then
// sends its own. So the kernel time over the iterations is one round trip: two hand-offs, each
// a producer's stores and announce and a consumer's wait, with nothing to hide them behind.

#include "warpvm/workloads/channel/peer_exchange.cuh"

namespace warpvm::workloads {

/// Words of a message: one 16-byte granule per warp of the block.
constexpr std::uint32_t pingpong_words = block_warps * 4;

/// Word w of GPU g's message k.
__host__ __device__ constexpr std::uint32_t pingpong_word(std::uint32_t g, std::uint32_t k, std::uint32_t w) {
  return (k * 2 + g) * 0x9e3779b1u + w;
}

struct Pingpong2Gpu {
  PeerExchange exchange;
  std::uint32_t gpu;         ///< 0 sends first
  std::uint32_t iterations;  ///< tags
  // channel, channel_direct: message k at k x pingpong_words of the other GPU's channel buffer,
  // tag k. peer_flag, naive, atomic_wait: into the other GPU's mailbox at the same place, then
  // k + 1 into exchange.published
  const std::uint32_t* mailbox;      ///< this GPU, [iterations][pingpong_words]
  std::uint32_t* neighbour_mailbox;  ///< the other GPU's `mailbox` (a peer address)
  std::uint32_t* wrong;              ///< words received that differ from the sender's
  Stamps stamps;
};

/// Block-collective: this GPU's message k into the other GPU's memory, then its announce.
__device__ inline void pingpong_send(const Pingpong2Gpu& m, std::uint32_t k) {
  std::uint32_t* to = uses_channel(m.exchange.mode) ? reinterpret_cast<std::uint32_t*>(m.exchange.to_neighbour.buffer())
                                                    : m.neighbour_mailbox;
  if (threadIdx.x < pingpong_words) to[std::uint64_t{k} * pingpong_words + threadIdx.x] = pingpong_word(m.gpu, k, threadIdx.x);
  __syncthreads();  // the message before thread 0's release (cumulative)
  if (threadIdx.x == 0) peer_announce(m.exchange, k);
}

/// Every warp: its 16 bytes of the other GPU's message k, checked.
__device__ inline void pingpong_receive(const Pingpong2Gpu& m, std::uint32_t k) {
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t first = std::uint64_t{k} * pingpong_words + warp_in_block * 4;
  const PeerWindow other = peer_meet(m.exchange, "pingpong2gpu", k, 16, first * 4, m.mailbox + first, m.stamps, warp_in_block);
  if (lane < 4 && other.load<std::uint32_t>(lane) != pingpong_word(1 - m.gpu, k, warp_in_block * 4 + lane))
    atomicAdd(m.wrong, 1u);
  other.release();
}

/// One block per GPU.
__global__ void __launch_bounds__(block_threads) pingpong2gpu_kernel(Pingpong2Gpu m) {
  const std::uint64_t started = detail::global_timer_ns();
  for (std::uint32_t k = 0; k < m.iterations; ++k) {
    if (m.gpu == 0) {
      pingpong_send(m, k);
      pingpong_receive(m, k);
    } else {
      pingpong_receive(m, k);
      __syncthreads();  // every warp's wait before the reply
      pingpong_send(m, k);
    }
    __syncthreads();  // the block's next send follows every warp's receive
  }
  m.stamps.life(threadIdx.x / 32, started, true);
  peer_block_done(m.exchange);
}

}  // namespace warpvm::workloads
