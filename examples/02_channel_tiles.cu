// Stream tiles from a host thread to a running kernel through a warpvm::channel: the host
// publishes each tile under its own tag as soon as it is ready, each warp of the kernel acquires
// the tiles it owns by tag (parking, not polling, while one is missing), sums them, and the sums
// are checked on the host.
//
//   build/examples/warpvm-example-channel-tiles [tiles]

#include <warpvm/channel.hpp>
#include <warpvm/warpvm.hpp>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr std::uint32_t tile_words = 4096;  // 16 KiB tiles
constexpr std::uint32_t tile_bytes = tile_words * 4;

std::uint32_t word_of(std::uint32_t tile, std::uint32_t i) { return (tile * 2654435761u) ^ (i * 40503u); }

}  // namespace

__global__ void sum_tiles(warpvm::channel_handle ch, std::uint32_t tiles, unsigned long long* sums) {
  const std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const std::uint32_t warps = gridDim.x * blockDim.x / 32;
  for (std::uint32_t tile = warp; tile < tiles; tile += warps) {
    // Warp-collective: every lane asks for the same tag; the warp sleeps until the data is in
    // device memory, then reads it with plain loads.
    const warpvm::channel_data data = ch.acquire(tile, 1, tile_bytes, std::uint64_t{tile} * tile_bytes);
    const auto* words = data.as<std::uint32_t>();
    unsigned long long s = 0;
    for (std::uint32_t i = threadIdx.x % 32; i < tile_words; i += 32) s += words[i];
    data.release();  // the staging pages may be reused
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (threadIdx.x % 32 == 0) sums[tile] = s;
  }
}

int main(int argc, char** argv) {
  const std::uint32_t tiles = argc > 1 ? static_cast<std::uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 4096;
  if (warpvm::device_count() == 0) {
    std::printf("no CUDA GPU visible: this example needs one\n");
    return 0;
  }
  if (tiles == 0) {
    std::fprintf(stderr, "usage: warpvm-example-channel-tiles [tiles >= 1]\n");
    return 2;
  }
  try {
    // At most one request per warp at a time: the channel takes as many as the launch has warps.
    constexpr unsigned blocks = 32, threads = 256;
    warpvm::channel ch(
        {.buffer_bytes = std::uint64_t{tiles} * tile_bytes, .tag_count = tiles, .max_warps = blocks * threads / 32});
    unsigned long long* sums = nullptr;
    WARPVM_CUDA_TRY(cudaMalloc(&sums, std::size_t{tiles} * sizeof *sums));
    sum_tiles<<<blocks, threads>>>(ch.device(), tiles, sums);
    WARPVM_CUDA_TRY(cudaGetLastError());

    // The producer: writes each tile straight into the channel's pinned buffer, then publishes
    // its tag (any order, any number of threads would do).
    std::thread producer([&] {
      for (std::uint32_t t = 0; t < tiles; ++t) {
        auto* words = reinterpret_cast<std::uint32_t*>(ch.buffer().data() + std::uint64_t{t} * tile_bytes);
        for (std::uint32_t i = 0; i < tile_words; ++i) words[i] = word_of(t, i);
        ch.publish(t, 1);
      }
    });
    producer.join();
    ch.synchronize();  // device-side failures (a watchdog, a bad request) are raised here

    std::vector<unsigned long long> got(tiles);
    WARPVM_CUDA_TRY(cudaMemcpy(got.data(), sums, got.size() * sizeof got[0], cudaMemcpyDeviceToHost));
    cudaFree(sums);
    std::uint32_t wrong = 0;
    for (std::uint32_t t = 0; t < tiles; ++t) {
      unsigned long long expected = 0;
      for (std::uint32_t i = 0; i < tile_words; ++i) expected += word_of(t, i);
      wrong += got[t] != expected ? 1u : 0u;
    }
    const warpvm::ChannelStats stats = ch.stats();
    std::printf("%u tiles of %u KiB through the channel: %s; %llu requests in %llu batches, %llu monitor passes\n",
                tiles, tile_bytes / 1024, wrong == 0 ? "every sum correct" : "WRONG SUMS",
                static_cast<unsigned long long>(stats.requests), static_cast<unsigned long long>(stats.batches),
                static_cast<unsigned long long>(stats.passes));
    return wrong == 0 ? 0 : 1;
  } catch (const warpvm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
