#pragma once
// The host side of warpvm's heap: a service thread that takes the device's requests from the
// ring in mapped pinned memory (heap_protocol.hpp) a batch at a time and serves them from the
// heap's space (heap_space.hpp). Touches only host memory: no CUDA calls.

#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/alloc/heap_space.hpp"
#include "warpvm/heap.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace warpvm::detail {

class HeapService {
 public:
  /// Serves `slots` (host address of the ring, `capacity` slots, a power of two) from a space of
  /// `segments` 2 MB segments, the first `portion_vablocks` of them the PortionSpace. Starts the
  /// service thread.
  HeapService(HeapSlot* slots, std::uint32_t capacity, std::uint32_t segments, std::uint32_t portion_vablocks);
  ~HeapService();
  HeapService(const HeapService&) = delete;
  HeapService& operator=(const HeapService&) = delete;

  /// Reserves `bytes` (a multiple of 2 MB) of whole segments for the device's own use (the
  /// fast path's small area) for as long as the service lives; no_offset when they are not free.
  std::uint64_t reserve(std::uint64_t bytes);
  /// Waits until every request below `position` has been taken and served.
  void wait_served(std::uint64_t position) const;
  [[nodiscard]] HeapStats stats() const;
  void reset_stats();

  /// Requests taken at most per batch.
  static constexpr std::size_t batch_limit = 4096;

 private:
  struct Taken {
    HeapSlot* slot;
    std::uint64_t position;
    HeapRequest kind;
    std::uint64_t value;
    std::uint32_t lanes;
    std::uint32_t lane_units;
  };

  void run();
  /// Takes the posted requests in position order (stopping at a slot not yet posted), serves
  /// the batch's frees, then its allocations. Returns how many it took.
  std::size_t serve_batch();
  std::uint32_t next_tag();
  /// Bytes in the requests' regions: the space's reservations less what reserve() set aside.
  [[nodiscard]] std::uint64_t region_bytes() const;
  /// What a refused request needed and what the space had then (HeapStats::last_refusal).
  [[nodiscard]] HeapRefusal refusal(const Taken& request) const;

  HeapSlot* slots_;
  std::uint32_t capacity_;
  std::uint64_t taken_ = 0;  // service thread only
  std::vector<Taken> batch_;
  std::vector<std::uint64_t> storage_;

  mutable std::mutex mutex_;  // guards space_, stats_ and tag_
  HeapSpace space_;
  HeapStats stats_{};
  std::uint32_t tag_ = 0;
  std::uint64_t set_aside_ = 0;  // by reserve()

  std::atomic<std::uint64_t> served_{0};  // positions below this are served
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace warpvm::detail
