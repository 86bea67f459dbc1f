#pragma once
// The host side of the host_batched transport: a service thread that takes faults from the
// GPU's fault buffer in batches and serves them with UVM's policy (sim/uvm_model.hpp, the same
// code the simulator replays traces through), copying pages with cudaMemcpyAsync.

#include "../core/cuda_buffers.hpp"

#include "warpvm/config.hpp"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/sim/uvm_model.hpp"
#include "warpvm/trace.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace warpvm::detail {

/// A migrate object as the service copies it.
struct ServedObject {
  const std::byte* host = nullptr;  ///< pinned backing store, host address
  std::uint64_t bytes = 0;
  PageEntry* pages = nullptr;       ///< device page table
};

class HostBatchedService {
 public:
  /// Serves into `frames` (device memory of `frame_count` 4 KB frames, used in 2 MB chunks of
  /// 512 frames) and records owners in `frame_owners`. Starts the service thread.
  HostBatchedService(const Config& config, std::byte* frames, std::uint64_t* frame_owners, std::uint32_t frame_count);
  ~HostBatchedService();
  HostBatchedService(const HostBatchedService&) = delete;
  HostBatchedService& operator=(const HostBatchedService&) = delete;

  /// What kernels use to post faults.
  [[nodiscard]] FaultRing ring() const { return ring_; }

  /// Holds the service between batches. set_object takes the returned lock as proof that it is
  /// held; the runtime holds it across a drop so that no batch lands between its steps. It runs
  /// only while no kernel does, so every post still in the buffer is stale (a duplicate of a
  /// served fault, or for an object going away): set_object drops them.
  [[nodiscard]] std::unique_lock<std::mutex> pause() { return std::unique_lock(mutex_); }
  /// Forgets the pages of object `id` (dropped from the cache), then serves it as `object`, or
  /// no longer when it is null.
  void set_object(const std::unique_lock<std::mutex>& paused, std::uint32_t id, const ServedObject* object);

  [[nodiscard]] std::uint64_t chunks() const { return chunks_; }
  /// 2 MB chunks the registered objects need to be resident whole.
  [[nodiscard]] std::uint64_t chunks_needed() const { return chunks_needed_.load(); }  // kept by set_object

  /// The batches served since the last clear_batches() (call it with no kernel running).
  [[nodiscard]] std::vector<FaultBatch> batches() const;
  void clear_batches();
  [[nodiscard]] std::uint64_t pages_in() const { return pages_in_.load(); }
  [[nodiscard]] std::uint64_t bytes_in() const { return bytes_in_.load(); }
  /// Zeroes pages_in and bytes_in (call it with no kernel running).
  void reset_totals();
  /// Throws the service thread's failure, if it had one. A failed service serves nothing more,
  /// so every later call throws it again.
  void raise_failure() const;

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  /// Takes up to `limit` faults in position order; stops at a slot not yet written.
  std::size_t take_faults(std::vector<std::uint64_t>& out, std::size_t limit);
  /// Drops every buffered post and tells the device how far the buffer has been taken. Lock held.
  void drop_stale_posts();
  /// Records the first failure; the thread then stops serving.
  void fail(ErrorKind kind, const std::string& what);
  void serve(std::vector<std::uint64_t> faults, Clock::time_point started);
  std::uint32_t chunk_for(std::uint64_t block);

  Config config_;
  std::byte* frames_;
  std::uint64_t* frame_owners_;
  std::uint64_t chunks_;
  stream_ptr stream_;
  pinned_ptr<std::uint64_t> slots_;
  device_ptr<ReplayState> replay_;
  pinned_ptr<ReplayState> staged_replay_;    // the next replay state, on its way to the device
  device_ptr<std::uint64_t> next_position_;
  pinned_ptr<std::uint64_t> staged_owners_;   // one batch's frame owners (whole chunks), on their way
  pinned_ptr<PageEntry> staged_entries_;      // one batch's page entries (whole blocks)
  std::size_t staged_capacity_ = 0;
  FaultRing ring_{};
  std::uint64_t taken_position_ = 0;

  mutable std::mutex mutex_;  // held while a batch is served, and by the runtime's changes
  sim::UvmModel model_;
  std::unordered_map<std::uint32_t, ServedObject> objects_;
  std::unordered_map<std::uint64_t, std::uint32_t> chunk_of_block_;
  std::vector<std::uint32_t> free_chunks_;
  std::vector<FaultBatch> batches_;
  Clock::time_point run_start_{};
  bool run_started_ = false;

  ErrorKind failure_kind_ = ErrorKind::cuda;  // guarded by mutex_, with failure_
  std::string failure_;
  std::atomic<std::uint64_t> chunks_needed_{0};
  std::atomic<std::uint64_t> pages_in_{0};
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warpvm::detail
