#pragma once
/// @file
/// UVM's fault servicing as the open driver states it, modelled on the host: faults collect in
/// a buffer; a batch takes up to 256 of them, drops duplicates, sorts them by address and
/// services them per 2 MB VA block (tree-based prefetch, detail/policy/uvm_prefetch.hpp); when
/// the GPU memory given to UVM is full, whole 2 MB chunks are evicted in the order of the last
/// migration into them (the driver's "LRU" does not see GPU accesses). After each batch the
/// faulting accesses replay; anything still in the buffer is dropped and faults again.
/// The simulator replays access patterns through it; a host-serviced transport can share it.

#include "warpvm/detail/policy/uvm_prefetch.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace warpvm::sim {

/// What servicing one batch did.
struct UvmBatch {
  std::uint32_t faults = 0;           ///< entries taken from the buffer
  std::uint32_t unique_faults = 0;    ///< after duplicates were dropped
  std::uint32_t blocks = 0;           ///< 2 MB VA blocks serviced
  std::uint32_t pages_faulted = 0;    ///< pages migrated because they faulted
  std::uint32_t pages_prefetched = 0; ///< pages migrated by the prefetcher
  std::uint32_t chunks_evicted = 0;
  std::uint32_t pages_evicted = 0;    ///< resident pages copied back with evicted chunks
};

class UvmModel {
 public:
  /// `chunks`: 2 MB chunks of GPU memory UVM may use (at least one); pages are 4 KB.
  explicit UvmModel(std::uint64_t chunks, bool prefetch = true, unsigned batch_size = 256,
                    unsigned threshold = detail::uvm_prefetch_threshold)
      : capacity_(std::max<std::uint64_t>(chunks, 1)), prefetch_(prefetch), batch_size_(batch_size), threshold_(threshold) {}

  /// One access by one warp to a 4 KB page (global page number; blocks are 512 aligned pages).
  /// A resident page is a hit; otherwise a fault entry is queued, and a full buffer is serviced.
  void access(std::uint64_t page) {
    if (resident(page)) {
      ++hits_;
      return;
    }
    buffer_.push_back(page);
    if (buffer_.size() >= batch_size_) service_batch();
  }
  /// Services what is left in the buffer (the end of a kernel).
  void drain() {
    while (!buffer_.empty()) service_batch();
  }

  [[nodiscard]] bool resident(std::uint64_t page) const {
    const auto it = blocks_.find(page / detail::uvm_block_pages);
    return it != blocks_.end() && it->second.resident.test(static_cast<unsigned>(page % detail::uvm_block_pages));
  }
  [[nodiscard]] const std::vector<UvmBatch>& batches() const { return batches_; }
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t chunks_in_use() const { return chunks_in_use_; }

 private:
  struct Block {
    detail::BlockMask resident;
    std::uint64_t last_migration = 0;  ///< 0: no chunk on the GPU
  };

  void service_batch() {
    const std::size_t taken = std::min<std::size_t>(buffer_.size(), batch_size_);
    std::vector<std::uint64_t> faults(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(taken));
    buffer_.clear();  // replay after the batch; what was not taken faults again (flush policy)
    UvmBatch batch;
    batch.faults = static_cast<std::uint32_t>(taken);
    std::sort(faults.begin(), faults.end());
    faults.erase(std::unique(faults.begin(), faults.end()), faults.end());
    batch.unique_faults = static_cast<std::uint32_t>(faults.size());
    for (std::size_t i = 0; i < faults.size();) {
      const std::uint64_t block_id = faults[i] / detail::uvm_block_pages;
      detail::BlockMask faulted;
      for (; i < faults.size() && faults[i] / detail::uvm_block_pages == block_id; ++i)
        faulted.set(static_cast<unsigned>(faults[i] % detail::uvm_block_pages));
      service_block(block_id, faulted, batch);
    }
    batches_.push_back(batch);
  }

  void service_block(std::uint64_t block_id, const detail::BlockMask& faulted, UvmBatch& batch) {
    ++batch.blocks;
    if (blocks_[block_id].last_migration == 0) take_chunk(block_id, batch);
    Block& block = blocks_[block_id];
    const detail::BlockMask new_faulted = faulted.without(block.resident);
    const detail::BlockMask prefetched =
        prefetch_ ? detail::uvm_prefetch_pages(block.resident, faulted, threshold_).without(block.resident)
                  : detail::BlockMask{};
    batch.pages_faulted += new_faulted.count();
    batch.pages_prefetched += prefetched.count();
    block.resident |= new_faulted;
    block.resident |= prefetched;
    lru_.erase(block.last_migration);
    block.last_migration = ++clock_;
    lru_[block.last_migration] = block_id;
  }

  /// Gives the block a 2 MB chunk, evicting the chunk migrated into longest ago when full.
  void take_chunk(std::uint64_t block_id, UvmBatch& batch) {
    if (chunks_in_use_ >= capacity_ && !lru_.empty()) {
      const auto oldest = lru_.begin();
      Block& victim = blocks_[oldest->second];
      batch.pages_evicted += victim.resident.count();
      ++batch.chunks_evicted;
      victim = Block{};
      lru_.erase(oldest);
      --chunks_in_use_;
    }
    ++chunks_in_use_;
    blocks_[block_id].last_migration = ++clock_;
    lru_[clock_] = block_id;
  }

  std::uint64_t capacity_;
  bool prefetch_;
  unsigned batch_size_;
  unsigned threshold_;
  std::vector<std::uint64_t> buffer_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::map<std::uint64_t, std::uint64_t> lru_;  ///< last migration -> block
  std::vector<UvmBatch> batches_;
  std::uint64_t chunks_in_use_ = 0;
  std::uint64_t clock_ = 0;
  std::uint64_t hits_ = 0;
};

}  // namespace warpvm::sim
