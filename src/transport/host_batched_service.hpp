#pragma once
// The host side of the host_batched transport: a service thread that takes faults from the
// GPU's fault buffer in batches and serves them with UVM's policy (detail/policy/uvm_model.hpp, the same
// code the simulator replays traces through), copying pages with cudaMemcpyAsync.

#include "warpvm/detail/core/cuda_buffers.hpp"

#include "warpvm/config.hpp"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/policy/uvm_model.hpp"
#include "warpvm/trace.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace warpvm::detail {

/// 2 MB chunks an object of `bytes` needs to be resident whole (chunks_needed(), from which the
/// launch check and the never-evicts flag decide).
[[nodiscard]] inline std::uint64_t chunks_for_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t chunk_bytes = std::uint64_t{uvm_block_pages} * 4096;
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}

/// A migrate object as the service copies it.
struct ServedObject {
  std::byte* host = nullptr;  ///< pinned backing store, host address (evicted dirty pages are written back there)
  std::uint64_t bytes = 0;
  PageEntry* pages = nullptr;       ///< device page table
};

class HostBatchedService {
 public:
  /// Serves into `frames` (device memory of `frame_count` 4 KB frames, used in 2 MB chunks of
  /// 512 frames), records owners in `frame_owners`, and reads and clears `frame_dirty` when it
  /// writes evicted pages back. Starts the service thread.
  HostBatchedService(const Config& config, std::byte* frames, std::uint64_t* frame_owners, std::uint32_t* frame_dirty,
                     std::uint32_t frame_count);
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
  /// Whether the service evicts (the objects need more chunks than the cache has); the runtime
  /// clears never_evicts exactly then, so that accesses hold their pages.
  [[nodiscard]] bool evicts() const { return chunks_needed() > chunks_; }

  /// Eviction orders not yet acknowledged, as (first order index, count): a kernel that ends
  /// leaves them posted. Before pages are dropped the runtime runs finish_evictions over them
  /// (no user kernel running, so no page is held) and then calls settle_orders().
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> unsettled_orders(const std::unique_lock<std::mutex>& paused) const;
  /// Takes the acknowledgements of every posted order; throws if one is missing.
  void settle_orders(const std::unique_lock<std::mutex>& paused);

  /// The batches served since the last clear_batches() (call it with no kernel running).
  [[nodiscard]] std::vector<FaultBatch> batches() const;
  void clear_batches();
  [[nodiscard]] std::uint64_t pages_in() const { return pages_in_.load(); }
  [[nodiscard]] std::uint64_t bytes_in() const { return bytes_in_.load(); }
  [[nodiscard]] std::uint64_t pages_evicted() const { return pages_evicted_.load(); }
  [[nodiscard]] std::uint64_t pages_out() const { return pages_out_.load(); }
  [[nodiscard]] std::uint64_t bytes_out() const { return bytes_out_.load(); }
  /// Zeroes the page and byte totals (call it with no kernel running).
  void reset_totals();
  /// Throws the service thread's failure, if it had one. A failed service serves nothing more,
  /// so every later call throws it again.
  void raise_failure() const;

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  /// Takes up to `limit` faults in position order; stops at a slot not yet written.
  std::size_t take_faults(std::vector<std::uint64_t>& out, std::size_t limit);
  /// Drops every buffered post and copies the replay state to the device (with how far the buffer
  /// has been taken, and whatever else the caller staged in it); returns the posts dropped. Lock held.
  std::size_t flush_posts();
  /// Records the first failure; the thread then stops serving.
  void fail(ErrorKind kind, const std::string& what);
  void serve(std::vector<std::uint64_t> faults, Clock::time_point started);

  /// The service's view of one 2 MB block the model holds resident.
  struct ServedBlock {
    std::uint32_t chunk = no_chunk;
    BlockMask copied;   ///< pages copied in and made VALID on the device
    BlockMask queued;   ///< pages the model migrated that are not copied yet (waiting for a chunk)
  };
  /// An eviction order the device has not acknowledged yet; its chunk is not reused before.
  struct PendingOrder {
    std::uint64_t index;
    std::uint64_t block;
    std::uint32_t chunk;
    BlockMask pages;  ///< the pages ordered (copied in, so VALID on the device when posted)
    Clock::time_point posted;
    bool withdrawing = false;  ///< the device was asked to withdraw it
  };
  static constexpr std::uint32_t no_chunk = ~0u;

  /// Gives up the block's chunk: posts an order for its copied pages, or frees it at once when
  /// none were. Returns the pages ordered evicted (through `chunk_given_up`, whether it had one).
  std::uint32_t evict_block(std::uint64_t block, bool& chunk_given_up);
  /// Gives up the chunks of the model's `evictions` (evict_block) and publishes the orders;
  /// counts them on `batch`.
  void give_up_chunks(const std::vector<detail::BlockPages>& evictions, FaultBatch& batch);
  /// Copies the posted orders and the replay state (with orders_posted) to the device.
  void publish_orders(std::size_t first_staged, std::size_t count);
  /// Takes the device's acknowledgements. Orders carried out (their pages are BUSY on the
  /// device) are finished: dirty pages written back (added to batch.pages_written_back), dirty
  /// bits cleared, the pages' entries written absent, the chunks freed. A withdrawn order's
  /// pages are resident again: while kernels may run its block keeps its chunk and goes back to
  /// the model (keep_withdrawn); between kernels (`kernels_stopped`, nothing is held or
  /// changed on the device) it is finished as an eviction instead, as the model still has it.
  void reap_orders(FaultBatch& batch, bool kernels_stopped);
  /// Finishes orders whose pages no device atomic changes any more (see reap_orders).
  void finish_evicted_orders(const std::vector<PendingOrder>& orders, std::uint32_t& written_back);
  /// A withdrawn order's block is resident again in its chunk, and touched in the model, which
  /// may give up other chunks instead (given up here).
  void keep_withdrawn(const PendingOrder& order, FaultBatch& batch);
  /// Asks the device to withdraw every order that has kept the queue waiting for `eviction_wait`
  /// (one of its pages stays held: a span or cursor kept across another fault).
  void withdraw_stuck_orders(Clock::time_point now);
  /// Whether some queued block cannot be copied now (its order or a free chunk is missing).
  [[nodiscard]] bool queue_blocked() const;
  /// Copies every queued block that can be copied now; returns pages and bytes copied.
  void copy_queued(std::uint64_t& pages, std::uint64_t& bytes);

  Config config_;
  std::byte* frames_;
  std::uint64_t* frame_owners_;
  std::uint32_t* frame_dirty_;
  std::uint64_t chunks_;
  stream_ptr stream_;
  pinned_ptr<std::uint64_t> slots_;
  device_ptr<ReplayState> replay_;
  pinned_ptr<ReplayState> staged_replay_;    // the next replay state, on its way to the device
  device_ptr<std::uint64_t> next_position_;
  pinned_ptr<std::uint64_t> staged_owners_;   // one batch's frame owners (whole chunks), on their way
  pinned_ptr<PageEntry> staged_entries_;      // one batch's page entries (whole blocks)
  std::size_t staged_capacity_ = 0;
  std::uint32_t order_capacity_ = 0;
  device_ptr<EvictionOrder> orders_;
  device_ptr<EvictionProgress> order_progress_;
  pinned_ptr<EvictionAck> order_acks_;            // mapped: written by the device
  device_ptr<EvictionRing> eviction_ring_;
  pinned_ptr<EvictionOrder> staged_orders_;       // one batch's orders, on their way
  pinned_ptr<EvictionProgress> staged_progress_;
  pinned_ptr<std::uint32_t> staged_dirty_;        // the dirty bits of chunks being reaped
  pinned_ptr<PageEntry> absent_entries_;          // one block of absent entries (zeros)
  FaultRing ring_{};
  std::uint64_t taken_position_ = 0;

  mutable std::mutex mutex_;  // held while a batch is served, and by the runtime's changes
  detail::UvmModel model_;
  std::unordered_map<std::uint32_t, ServedObject> objects_;
  std::unordered_map<std::uint64_t, ServedBlock> blocks_;
  std::vector<std::uint64_t> queue_;                 // blocks with queued pages, in arrival order
  std::unordered_set<std::uint64_t> evicting_blocks_;  // blocks with an order outstanding
  std::vector<PendingOrder> pending_orders_;
  std::uint64_t orders_posted_ = 0;
  std::vector<std::uint32_t> free_chunks_;
  std::vector<FaultBatch> batches_;
  Clock::time_point run_start_{};
  bool run_started_ = false;

  ErrorKind failure_kind_ = ErrorKind::cuda;  // guarded by mutex_, with failure_
  std::string failure_;
  std::atomic<std::uint64_t> chunks_needed_{0};
  std::atomic<std::uint64_t> pages_in_{0};
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<std::uint64_t> pages_evicted_{0};
  std::atomic<std::uint64_t> pages_out_{0};
  std::atomic<std::uint64_t> bytes_out_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warpvm::detail
