#pragma once
// The harness of warpvm-channel-bench's CPU-to-GPU workloads (cpu_workloads.cuh): one GPU, a
// channel with its host monitor and the baselines' pinned buffer and flags, one run at a time in
// any mode, timed by events and by the warps' stamps (RunTiming). The records are the bench's.

#include "warpvm/workloads/channel/cpu_workloads.cuh"
#include "warpvm/workloads/channel/run_support.cuh"
#include "warpvm/channel.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace warpvm::workloads {

/// --producer-cpu: pins the calling thread to `cpu` (-1: nothing) until destroyed, then gives it
/// back the CPUs it had. Around the producer only: threads created meanwhile (a channel's
/// monitor) would inherit the pin.
class PinnedToCpu {
 public:
  explicit PinnedToCpu(int cpu) {
    if (cpu < 0) return;
    check_affinity(pthread_getaffinity_np(pthread_self(), sizeof(before_), &before_), "pthread_getaffinity_np");
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(cpu, &only);
    check_affinity(pthread_setaffinity_np(pthread_self(), sizeof(only), &only), "--producer-cpu");
    pinned_ = true;
  }
  ~PinnedToCpu() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof(before_), &before_);
  }
  PinnedToCpu(const PinnedToCpu&) = delete;
  PinnedToCpu& operator=(const PinnedToCpu&) = delete;

 private:
  static void check_affinity(int failed, const char* what) {
    if (failed != 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(failed));
  }
  bool pinned_ = false;
  cpu_set_t before_{};
};

/// Runs one CPU-to-GPU workload in every mode with the same buffers, channel and stamps: a kernel
/// of its consumer blocks and compute blocks, its host producer on this thread meanwhile.
class CpuToGpuHarness {
 public:
  CpuToGpuHarness(CpuToGpuWorkload& w, const ChannelSetup& s, int sms) : w_(w), s_(s) {
    compute_blocks_ = s.compute_blocks != 0 ? s.compute_blocks : 2u * static_cast<std::uint32_t>(sms);
    std::uint32_t consumer_blocks = 0;
    for (const WaitMode m : cpu_to_gpu_modes) {
      consumer_blocks = std::max(consumer_blocks, w.consumer_blocks(m));
      wait_capacity_ = std::max(wait_capacity_, w.waits_per_warp(m));
    }
    w.check_resident(consumer_blocks, sms);
    max_warps_ = (consumer_blocks + compute_blocks_) * block_warps;
    scratch_bytes_ = (w.window_bytes() + 15) / 16 * 16;  // 16-byte copies into it
    ch_ = std::make_unique<channel>(ChannelConfig{.buffer_bytes = w.buffer_bytes(),
                                                  .tag_count = w.tags(),
                                                  .staging_page_bytes = 4096,
                                                  .staging_pages = 8192,
                                                  .max_warps = max_warps_,
                                                  .monitor_cpu = s.monitor_cpu});
    constexpr unsigned mapped = cudaHostAllocMapped | cudaHostAllocPortable;
    pinned_ = detail::make_pinned_zeroed<std::byte>(w.buffer_bytes(), mapped, "the baselines' buffer");
    flags_ = detail::make_pinned_zeroed<std::uint32_t>(w.tags(), mapped, "the baselines' flags");
    expect_cuda(cudaMalloc(&scratch_, std::uint64_t{consumer_blocks} * block_warps * scratch_bytes_), "cudaMalloc scratch");
    expect_cuda(cudaMalloc(&compute_out_, std::uint64_t{max_warps_} * 32 * 4), "cudaMalloc compute_out");
    stamps_ = std::make_unique<DeviceStamps>(max_warps_, max_warps_, wait_capacity_);
    expect_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    expect_cuda(cudaEventCreate(&begin_), "cudaEventCreate");
    expect_cuda(cudaEventCreate(&end_), "cudaEventCreate");
  }
  ~CpuToGpuHarness() {
    cudaFree(scratch_);
    cudaFree(compute_out_);
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
    cudaStreamDestroy(stream_);
  }
  CpuToGpuHarness(const CpuToGpuHarness&) = delete;
  CpuToGpuHarness& operator=(const CpuToGpuHarness&) = delete;

  RunTiming run(WaitMode mode, bool consumers_only, bool compute_only) {
    const std::uint32_t consumer_blocks = w_.consumer_blocks(mode);
    const std::uint32_t blocks = consumer_blocks + compute_blocks_;
    const std::uint32_t warps = blocks * block_warps;
    if (mode == WaitMode::channel) ch_->reset();
    std::memset(flags_.get(), 0, std::uint64_t{w_.tags()} * 4);
    w_.prepare();
    stamps_->clear();
    expect_cuda(cudaDeviceSynchronize(), "sync");
    const Launch l{Source{mode, ch_->device(), detail::on_device(pinned_.get()), detail::on_device(flags_.get()),
                          scratch_, scratch_bytes_, stamps_->view()},
                   consumer_blocks, s_.compute_iters, compute_out_, consumers_only, compute_only};
    expect_cuda(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    w_.launch(l, blocks, stream_);
    expect_cuda(cudaGetLastError(), "launch");
    expect_cuda(cudaEventRecord(end_, stream_), "cudaEventRecord");
    const auto launched = std::chrono::steady_clock::now();
    double producer_s = 0, publish_s = 0;
    std::uint64_t publishes = 0;
    if (!compute_only) {
      const PinnedToCpu producer_cpu(s_.producer_cpu);
      std::byte* buffer = mode == WaitMode::channel ? ch_->buffer().data() : pinned_.get();
      std::uint32_t* flags = flags_.get();
      w_.produce(
          buffer,
          [&](std::uint32_t first, std::uint32_t count) {
            const auto called = std::chrono::steady_clock::now();
            if (mode == WaitMode::channel) ch_->publish(first, count);
            else
              for (std::uint32_t t = first; t < first + count; ++t)
                std::atomic_ref<std::uint32_t>(flags[t]).store(1, std::memory_order_release);
            publish_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
            ++publishes;
          },
          [&] { return cudaEventQuery(end_) != cudaErrorNotReady; });
      producer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
    }
    expect_cuda(cudaEventSynchronize(end_), "kernel");
    ch_->synchronize();
    float ms = 0;
    expect_cuda(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");

    std::vector<WarpTimeline> timelines = stamps_->read(warps, [](std::uint64_t w) { return w; });
    std::erase_if(timelines, [&](const WarpTimeline& t) { return t.consumer ? compute_only : consumers_only; });
    unsigned long long first = ~0ull, last = 0;
    double compute_lives = 0;
    std::uint64_t compute_warps = 0;
    for (const WarpTimeline& t : timelines) {
      first = std::min<unsigned long long>(first, t.life.begin);
      last = std::max<unsigned long long>(last, t.life.end);
      if (!t.consumer) {
        compute_lives += static_cast<double>(t.life.end - t.life.begin) / 1e9;
        ++compute_warps;
      }
    }
    RunTiming t;
    t.compute_warp_s = compute_warps != 0 ? compute_lives / static_cast<double>(compute_warps) : 0;
    t.seconds = ms / 1e3;
    t.span_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
    t.producer_s = producer_s;
    t.publish_us = publishes != 0 ? publish_s * 1e6 / static_cast<double>(publishes) : 0;
    t.waits = wait_metrics(timelines);
    t.timelines = std::move(timelines);
    t.verified = compute_only || w_.verify();
    return t;
  }

  [[nodiscard]] ChannelStats channel_stats() const { return ch_->stats(); }
  [[nodiscard]] std::uint32_t compute_blocks() const { return compute_blocks_; }

 private:
  CpuToGpuWorkload& w_;
  ChannelSetup s_;
  std::uint32_t compute_blocks_ = 0, max_warps_ = 0, wait_capacity_ = 1, scratch_bytes_ = 0;
  std::unique_ptr<channel> ch_;
  detail::pinned_ptr<std::byte> pinned_;     ///< the baselines' buffer (mapped)
  detail::pinned_ptr<std::uint32_t> flags_;  ///< the baselines' flags, one per tag (mapped)
  std::unique_ptr<DeviceStamps> stamps_;
  std::byte* scratch_ = nullptr;
  std::uint32_t* compute_out_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

}  // namespace warpvm::workloads
