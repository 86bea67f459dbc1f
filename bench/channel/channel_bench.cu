// warpvm-channel-bench: streaming image tiles CPU to GPU (issue #7's first workload). A host
// thread publishes N tiles, one every `interval` microseconds; consumer warps blur each tile
// (3x3 box sum) into device memory while compute warps of the same kernel run independent work.
// Three ways to meet the data, all checked against a host reference:
//
//   channel       warpvm::channel: the warp posts a request and parks on a device word; the
//                 monitor thread copies the tile into staging and wakes it
//   pinned_flag   each consumer warp's lane 0 spins on a flag in pinned host memory (an acquire
//                 load over PCIe per poll), then the warp copies the tile from pinned memory
//   naive         the paper's Algorithm 1: per block, __syncthreads, thread 0 spins on the
//                 tile's flag in pinned host memory, __syncthreads, then the block copies the
//                 tile from pinned memory. The paper polls with atomicAdd(&flag, 0) on managed
//                 memory; on the lent H200 (no host-native atomics) a device atomicAdd on pinned
//                 host memory never saw the host's store (the kernel hung), so thread 0 polls
//                 with a system-scope acquire load instead: the same spin, one PCIe read each
//
// JSON Lines (bench/micro's Recorder), one record per mode: seconds (median kernel time),
// wait_share (share of consumer-warp time spent waiting for data, the paper's Fig. 5),
// overlap_efficiency (see docs/channels.md), t_compute_s / t_stream_s (each side alone).

#include "../micro/bench_support.cuh"
#include "cli_args.hpp"

#include "warpvm/channel.hpp"

#include <cuda/atomic>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

namespace warpvm::bench {
namespace {

enum class Mode { channel, pinned_flag, naive };

struct Setup {
  std::uint32_t tiles = 4096;
  std::uint32_t side = 64;           ///< tile is side x side uint32 pixels
  double interval_us = 2.0;          ///< the producer publishes a tile every this many microseconds
  std::uint32_t consumer_blocks = 0;  ///< 0: one per SM
  std::uint32_t compute_blocks = 0;   ///< 0: two per SM
  std::uint32_t compute_iters = 500000;  ///< near the stream's time at the defaults: overlap can show
  [[nodiscard]] std::uint32_t pixels() const { return side * side; }
  [[nodiscard]] std::uint64_t tile_bytes() const { return std::uint64_t{pixels()} * 4; }
};

constexpr std::uint32_t block_threads = 256;
constexpr std::uint32_t block_warps = block_threads / 32;

struct KernelArgs {
  Mode mode;
  channel_handle ch;
  const std::uint32_t* pinned;  ///< baselines: the tiles in mapped pinned memory (device address)
  std::uint32_t* flags;         ///< baselines: one flag per tile, mapped pinned memory
  std::uint32_t* scratch;       ///< baselines: one tile per consumer warp, device memory
  std::uint32_t* out;           ///< blurred tiles
  std::uint32_t* compute_out;
  unsigned long long* stamps;   ///< [warp][4]: start, end, waiting ns, 0
  std::uint32_t tiles, side, consumer_blocks, compute_iters;
  bool consumers_only, compute_only;
};

__device__ __forceinline__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// 3x3 box sum with clamped borders, lanes of a warp (or threads of a block) striding over pixels.
__device__ void blur(const std::uint32_t* tile, std::uint32_t* out, std::uint32_t side, std::uint32_t first,
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

/// Copies a tile from pinned host memory with 16-byte loads (threads first, first + stride, ...).
__device__ void copy_tile(const std::uint32_t* from, std::uint32_t* to, std::uint32_t pixels, std::uint32_t first,
                          std::uint32_t stride) {
  const auto* src = reinterpret_cast<const uint4*>(from);
  auto* dst = reinterpret_cast<uint4*>(to);
  for (std::uint32_t i = first; i < pixels / 4; i += stride) dst[i] = src[i];
}

__global__ void __launch_bounds__(block_threads) tiles_kernel(KernelArgs a) {
  const std::uint32_t warp_in_block = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint32_t warp = blockIdx.x * block_warps + warp_in_block;
  const std::uint64_t start = now_ns();
  std::uint64_t waiting = 0;
  const std::uint32_t pixels = a.side * a.side;
  if (blockIdx.x < a.consumer_blocks) {
    if (!a.compute_only) {
      if (a.mode == Mode::naive) {  // Algorithm 1: the block is the consumer
        std::uint32_t* scratch = a.scratch + std::uint64_t{blockIdx.x} * block_warps * pixels;
        for (std::uint32_t t = blockIdx.x; t < a.tiles; t += a.consumer_blocks) {
          const std::uint64_t t0 = now_ns();
          __syncthreads();
          if (threadIdx.x == 0)  // Algorithm 1 spins with atomicAdd(&flag, 0); see the file comment
            while (cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(a.flags[t]).load(
                       cuda::std::memory_order_acquire) != 1u) {
            }
          __syncthreads();
          waiting += now_ns() - t0;
          copy_tile(a.pinned + std::uint64_t{t} * pixels, scratch, pixels, threadIdx.x, block_threads);
          __syncthreads();
          blur(scratch, a.out + std::uint64_t{t} * pixels, a.side, threadIdx.x, block_threads);
        }
      } else {
        const std::uint32_t consumer_warps = a.consumer_blocks * block_warps;
        std::uint32_t* scratch = a.scratch + std::uint64_t{warp} * pixels;
        for (std::uint32_t t = warp; t < a.tiles; t += consumer_warps) {
          const std::uint64_t t0 = now_ns();
          if (a.mode == Mode::channel) {
            const channel_data data = a.ch.acquire(t, 1, pixels * 4, std::uint64_t{t} * pixels * 4);
            waiting += now_ns() - t0;
            blur(data.as<std::uint32_t>(), a.out + std::uint64_t{t} * pixels, a.side, lane, 32);
            data.release();
          } else {
            if (lane == 0)
              while (cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(a.flags[t]).load(
                         cuda::std::memory_order_acquire) != 1u) {
              }
            __syncwarp();
            waiting += now_ns() - t0;
            copy_tile(a.pinned + std::uint64_t{t} * pixels, scratch, pixels, lane, 32);
            __syncwarp();
            blur(scratch, a.out + std::uint64_t{t} * pixels, a.side, lane, 32);
            __syncwarp();
          }
        }
      }
    }
  } else if (!a.consumers_only) {  // independent work: an integer hash chain per thread
    std::uint32_t x = blockIdx.x * block_threads + threadIdx.x + 1;
    for (std::uint32_t i = 0; i < a.compute_iters; ++i) x = x * 1664525u + 1013904223u + (x >> 13);
    a.compute_out[blockIdx.x * block_threads + threadIdx.x] = x;
  }
  if (lane == 0) {
    unsigned long long* s = a.stamps + std::uint64_t{warp} * 4;
    s[0] = start;
    s[1] = now_ns();
    s[2] = waiting;
    s[3] = blockIdx.x < a.consumer_blocks ? 1 : 0;
  }
}

std::vector<std::uint32_t> reference_blur(const std::vector<std::uint32_t>& tiles, const Setup& s) {
  std::vector<std::uint32_t> out(tiles.size());
  const int side = static_cast<int>(s.side);
  for (std::uint64_t t = 0; t < s.tiles; ++t) {
    const std::uint32_t* in = tiles.data() + t * s.pixels();
    for (int y = 0; y < side; ++y)
      for (int x = 0; x < side; ++x) {
        std::uint32_t sum = 0;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx)
            sum += in[std::clamp(y + dy, 0, side - 1) * side + std::clamp(x + dx, 0, side - 1)];
        out[t * s.pixels() + y * side + x] = sum;
      }
  }
  return out;
}

struct Timing {
  double seconds = 0;     ///< event time of the kernel
  double span_s = 0;      ///< from stamps: first start to last end
  double wait_share = 0;  ///< consumer warps: waiting / lifetime
};

class Harness {
 public:
  Harness(const Setup& s, int sms) : s_(s) {
    consumer_blocks_ = s.consumer_blocks != 0 ? s.consumer_blocks : static_cast<std::uint32_t>(sms);
    compute_blocks_ = s.compute_blocks != 0 ? s.compute_blocks : 2u * static_cast<std::uint32_t>(sms);
    const std::uint32_t blocks = consumer_blocks_ + compute_blocks_;
    tiles_.resize(std::uint64_t{s.tiles} * s.pixels());
    fill_random(tiles_.data(), tiles_.size(), 42);
    reference_ = reference_blur(tiles_, s);
    ch_ = std::make_unique<channel>(ChannelConfig{.buffer_bytes = s.tiles * s.tile_bytes(),
                                                  .tag_count = s.tiles,
                                                  .staging_page_bytes = 4096,
                                                  .staging_pages = 8192,
                                                  .max_warps = blocks * block_warps});
    pinned_ = std::make_unique<PinnedArray>(s.tiles * s.tile_bytes());
    flags_ = std::make_unique<PinnedArray>(std::uint64_t{s.tiles} * 4);
    check(cudaMalloc(&scratch_, std::uint64_t{consumer_blocks_} * block_warps * s.tile_bytes()), "cudaMalloc scratch");
    check(cudaMalloc(&out_, s.tiles * s.tile_bytes()), "cudaMalloc out");
    check(cudaMalloc(&compute_out_, std::uint64_t{blocks} * block_threads * 4), "cudaMalloc compute_out");
    check(cudaMalloc(&stamps_, std::uint64_t{blocks} * block_warps * 4 * 8), "cudaMalloc stamps");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&begin_), "cudaEventCreate");
    check(cudaEventCreate(&end_), "cudaEventCreate");
  }
  ~Harness() {
    cudaFree(scratch_);
    cudaFree(out_);
    cudaFree(compute_out_);
    cudaFree(stamps_);
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
    cudaStreamDestroy(stream_);
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  /// One run; `verified` says whether every blurred pixel matched (when consumers ran).
  Timing run(Mode mode, bool consumers_only, bool compute_only, bool& verified) {
    const std::uint32_t blocks = consumer_blocks_ + compute_blocks_;
    if (mode == Mode::channel) ch_->reset();
    std::memset(flags_->as<void>(), 0, flags_->bytes());
    check(cudaMemset(out_, 0, s_.tiles * s_.tile_bytes()), "cudaMemset out");
    check(cudaDeviceSynchronize(), "sync");
    void* pinned_dev = nullptr;
    void* flags_dev = nullptr;
    check(cudaHostGetDevicePointer(&pinned_dev, pinned_->as<void>(), 0), "cudaHostGetDevicePointer");
    check(cudaHostGetDevicePointer(&flags_dev, flags_->as<void>(), 0), "cudaHostGetDevicePointer");
    const KernelArgs args{mode, ch_->device(), static_cast<const std::uint32_t*>(pinned_dev),
                          static_cast<std::uint32_t*>(flags_dev), scratch_, out_, compute_out_, stamps_, s_.tiles,
                          s_.side, consumer_blocks_, s_.compute_iters, consumers_only, compute_only};
    check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    tiles_kernel<<<blocks, block_threads, 0, stream_>>>(args);
    check(cudaGetLastError(), "launch");
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    if (!compute_only) produce(mode);
    check(cudaEventSynchronize(end_), "kernel");
    ch_->synchronize();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");

    std::vector<unsigned long long> stamps(std::uint64_t{blocks} * block_warps * 4);
    check(cudaMemcpy(stamps.data(), stamps_, stamps.size() * 8, cudaMemcpyDeviceToHost), "stamps");
    Timing t;
    t.seconds = ms / 1e3;
    unsigned long long first = ~0ull, last = 0;
    double waited = 0, lived = 0;
    for (std::uint64_t w = 0; w < std::uint64_t{blocks} * block_warps; ++w) {
      const unsigned long long* st = stamps.data() + w * 4;
      const bool consumer = st[3] == 1;
      if ((consumer && compute_only) || (!consumer && consumers_only)) continue;
      first = std::min(first, st[0]);
      last = std::max(last, st[1]);
      if (consumer) {
        waited += static_cast<double>(st[2]);
        lived += static_cast<double>(st[1] - st[0]);
      }
    }
    t.span_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
    t.wait_share = lived > 0 ? waited / lived : 0;
    verified = true;
    if (!compute_only) {
      std::vector<std::uint32_t> out(reference_.size());
      check(cudaMemcpy(out.data(), out_, out.size() * 4, cudaMemcpyDeviceToHost), "out");
      verified = out == reference_;
    }
    return t;
  }

  [[nodiscard]] std::uint32_t consumer_blocks() const { return consumer_blocks_; }
  [[nodiscard]] ChannelStats channel_stats() const { return ch_->stats(); }
  [[nodiscard]] std::uint32_t compute_blocks() const { return compute_blocks_; }

 private:
  /// The producer: tile t is written and published at start + t * interval.
  void produce(Mode mode) {
    const auto started = std::chrono::steady_clock::now();
    const auto interval = std::chrono::duration<double, std::micro>(s_.interval_us);
    std::byte* target = mode == Mode::channel ? ch_->buffer().data() : pinned_->as<std::byte>();
    for (std::uint32_t t = 0; t < s_.tiles; ++t) {
      const auto due = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval * t);
      while (std::chrono::steady_clock::now() < due) {
      }
      std::memcpy(target + t * s_.tile_bytes(), tiles_.data() + std::uint64_t{t} * s_.pixels(), s_.tile_bytes());
      if (mode == Mode::channel) ch_->publish(t, 1);
      else std::atomic_ref<std::uint32_t>(flags_->as<std::uint32_t>()[t]).store(1, std::memory_order_release);
    }
  }

  Setup s_;
  std::uint32_t consumer_blocks_ = 0, compute_blocks_ = 0;
  std::vector<std::uint32_t> tiles_, reference_;
  std::unique_ptr<channel> ch_;
  std::unique_ptr<PinnedArray> pinned_, flags_;
  std::uint32_t* scratch_ = nullptr;
  std::uint32_t* out_ = nullptr;
  std::uint32_t* compute_out_ = nullptr;
  unsigned long long* stamps_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-channel-bench [--modes channel,pinned_flag,naive] [--tiles 4096] [--side 64] "
               "[--interval-us 2] [--consumer-blocks 0] [--compute-blocks 0] [--compute-iters 500000] "
               "[--repeats 5] [--out file.jsonl] [--commit SHA] [--driver VER]\n",
               message);
  std::exit(2);
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "channel";
  options.repeats = 5;
  Setup setup;
  std::vector<std::string> modes{"channel", "pinned_flag", "naive"};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("warpvm-channel-bench: streaming tiles CPU to GPU, JSON Lines out");
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--modes") modes = warpvm::tools::split_list(value);
    else if (flag == "--tiles") setup.tiles = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--side") setup.side = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--interval-us") setup.interval_us = std::stod(value);
    else if (flag == "--consumer-blocks") setup.consumer_blocks = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--compute-blocks") setup.compute_blocks = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--compute-iters") setup.compute_iters = static_cast<std::uint32_t>(std::stoul(value));
    else if (flag == "--repeats") options.repeats = std::stoi(value);
    else if (flag == "--out") options.out = value;
    else if (flag == "--commit") options.commit = value;
    else if (flag == "--driver") options.driver = value;
    else usage(("unknown option " + flag).c_str());
  }
  if (options.repeats < 1 || setup.side % 2 != 0 || setup.side < 2 || setup.tiles == 0) usage("bad sizes");
  if (warpvm::device_count() == 0) {
    std::fprintf(stderr, "warpvm-channel-bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  try {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
    Harness harness(setup, sms);
    Recorder recorder(options);
    bool all_verified = true;
    for (const std::string& mode_name : modes) {
      const Mode mode = mode_name == "channel" ? Mode::channel : mode_name == "pinned_flag" ? Mode::pinned_flag
                        : mode_name == "naive" ? Mode::naive : (usage(("unknown mode " + mode_name).c_str()), Mode::naive);
      bool ok = true, verified = true;
      (void)harness.run(mode, false, false, ok);  // warm-up
      Record r;
      r.workload = "tiles";
      r.mode = mode_name;
      r.cache_fraction = 1;
      r.dataset_bytes = r.useful_bytes = setup.tiles * setup.tile_bytes();
      r.bytes_moved = static_cast<std::int64_t>(r.dataset_bytes);
      std::vector<double> spans, waits, streams, computes;
      const warpvm::ChannelStats before = harness.channel_stats();
      for (int rep = 0; rep < options.repeats; ++rep) {
        const Timing both = harness.run(mode, false, false, ok);
        verified = verified && ok;
        r.seconds.push_back(both.seconds);
        spans.push_back(both.span_s);
        waits.push_back(both.wait_share);
        streams.push_back(harness.run(mode, true, false, ok).span_s);
        verified = verified && ok;
        computes.push_back(harness.run(mode, false, true, ok).span_s);
      }
      const double total = median(spans), stream = median(streams), compute = median(computes);
      const double hidden = (stream + compute - total) / std::min(stream, compute);
      r.verified = verified;
      all_verified = all_verified && verified;
      r.extra["tiles"] = setup.tiles;
      r.extra["tile_bytes"] = static_cast<double>(setup.tile_bytes());
      r.extra["interval_us"] = setup.interval_us;
      r.extra["consumer_blocks"] = harness.consumer_blocks();
      r.extra["compute_blocks"] = harness.compute_blocks();
      r.extra["compute_iters"] = setup.compute_iters;
      r.extra["span_s"] = total;
      r.extra["t_stream_s"] = stream;
      r.extra["t_compute_s"] = compute;
      r.extra["overlap_efficiency"] = std::clamp(hidden, 0.0, 1.0);
      r.extra["wait_share"] = median(waits);
      if (mode == Mode::channel) {  // the monitor's work per tile, over the measured runs
        const warpvm::ChannelStats after = harness.channel_stats();
        const double served = static_cast<double>(after.requests - before.requests);
        r.extra["monitor_passes_per_tile"] = static_cast<double>(after.passes - before.passes) / served;
        r.extra["batches_per_tile"] = static_cast<double>(after.batches - before.batches) / served;
        r.extra["answer_stalls_per_tile"] = static_cast<double>(after.answer_stalls - before.answer_stalls) / served;
        r.extra["largest_batch"] = after.largest_batch;
        const double passes = static_cast<double>(after.passes - before.passes);
        r.extra["serving_us_per_pass"] = (after.serving_seconds - before.serving_seconds) * 1e6 / passes;
        r.extra["copy_call_us_per_pass"] = (after.copy_call_seconds - before.copy_call_seconds) * 1e6 / passes;
      }
      recorder.write(r);
    }
    return all_verified ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-channel-bench: %s\n", e.what());
    return 1;
  }
}
