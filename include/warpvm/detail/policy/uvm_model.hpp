#pragma once
/// @file
/// UVM's fault servicing as the open driver states it, modelled on the host: faults collect in
/// a buffer; a batch takes up to 256 of them, drops duplicates, sorts them by address and
/// services them per 2 MB VA block (tree-based prefetch, detail/policy/uvm_prefetch.hpp); when
/// the GPU memory given to UVM is full, whole 2 MB chunks are evicted in the order of the last
/// migration into them (the driver's "LRU" does not see GPU accesses; a chunk whose eviction
/// fails counts as migrated into then). After each batch the
/// faulting accesses replay; anything still in the buffer is dropped and faults again.
/// The simulator replays access patterns through it; a host-serviced transport can share it.

#include "warpvm/detail/policy/uvm_prefetch.hpp"
#include "warpvm/trace.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace warpvm::detail {

using UvmBatch = FaultBatch;

/// Pages of one 2 MB VA block (global page / 512) to copy in, or evicted.
struct BlockPages {
  std::uint64_t block = 0;
  BlockMask pages;
};

/// What servicing one batch decided: its record, and the copies that carry it out.
struct UvmPlan {
  UvmBatch batch;
  std::vector<BlockPages> migrations;  ///< pages to copy in (faulted and prefetched)
  std::vector<BlockPages> evictions;   ///< chunks given up, with the pages they held
};

class UvmModel {
 public:
  /// `chunks`: 2 MB chunks of GPU memory UVM may use (at least one); pages are 4 KB.
  explicit UvmModel(std::uint64_t chunks, bool prefetch = true, unsigned batch_size = 256,
                    unsigned threshold = uvm_prefetch_threshold)
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
    const auto it = blocks_.find(page / uvm_block_pages);
    return it != blocks_.end() && it->second.resident.test(static_cast<unsigned>(page % uvm_block_pages));
  }
  /// The resident pages of a 2 MB block.
  [[nodiscard]] BlockMask resident_pages(std::uint64_t block) const {
    const auto it = blocks_.find(block);
    return it == blocks_.end() ? BlockMask{} : it->second.resident;
  }
  [[nodiscard]] const std::vector<UvmBatch>& batches() const { return batches_; }
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t chunks_in_use() const { return chunks_in_use_; }

  /// Services one batch of faults (global 4 KB page numbers, duplicates allowed): drops the
  /// duplicates, sorts, and services each 2 MB block once. The host_batched transport calls
  /// this directly with the faults it took from the GPU's buffer.
  [[nodiscard]] UvmPlan service(std::vector<std::uint64_t> faults) {
    UvmPlan plan;
    plan.batch.faults = static_cast<std::uint32_t>(faults.size());
    std::sort(faults.begin(), faults.end());
    faults.erase(std::unique(faults.begin(), faults.end()), faults.end());
    plan.batch.unique_faults = static_cast<std::uint32_t>(faults.size());
    for (std::size_t i = 0; i < faults.size();) {
      const std::uint64_t block_id = faults[i] / uvm_block_pages;
      BlockMask faulted;
      for (; i < faults.size() && faults[i] / uvm_block_pages == block_id; ++i)
        faulted.set(static_cast<unsigned>(faults[i] % uvm_block_pages));
      service_block(block_id, faulted, plan);
    }
    return plan;
  }
  /// An eviction that could not be carried out (the GPU kept the chunk's pages held, as the
  /// driver's PMM skips a pinned root chunk): the block is resident again with `pages` (added to
  /// any it was given since), and touched, as the driver puts a chunk it did not evict back at
  /// the tail of its used list, so that the next victim is another chunk. Taking its chunk back
  /// can exceed the chunks the model has: the chunks migrated into longest ago among the others
  /// are evicted instead, and returned.
  [[nodiscard]] std::vector<BlockPages> eviction_failed(std::uint64_t block_id, const BlockMask& pages) {
    Block& block = blocks_[block_id];
    if (block.last_migration == 0)
      ++chunks_in_use_;  // the chunk comes back (a block migrated into again since has one already)
    else
      lru_.erase(block.last_migration);
    block.resident |= pages;
    block.last_migration = ++clock_;
    lru_[clock_] = block_id;
    std::vector<BlockPages> evictions;
    while (chunks_in_use_ > capacity_) evictions.push_back(evict_oldest());  // never this block: it is the newest
    return evictions;
  }
  /// Forgets every block `drop(block)` names, as if it had never been migrated (its data was
  /// dropped from the GPU), giving its chunk back.
  template <class Predicate>
  void forget_blocks(Predicate&& drop) {
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      if (!drop(it->first)) {
        ++it;
        continue;
      }
      if (it->second.last_migration != 0) {
        lru_.erase(it->second.last_migration);
        --chunks_in_use_;
      }
      it = blocks_.erase(it);
    }
  }

 private:
  struct Block {
    BlockMask resident;
    std::uint64_t last_migration = 0;  ///< 0: no chunk on the GPU
  };

  void service_batch() {
    const std::size_t taken = std::min<std::size_t>(buffer_.size(), batch_size_);
    std::vector<std::uint64_t> faults(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(taken));
    buffer_.clear();  // replay after the batch; what was not taken faults again (flush policy)
    batches_.push_back(service(std::move(faults)).batch);
  }

  void service_block(std::uint64_t block_id, const BlockMask& faulted, UvmPlan& plan) {
    UvmBatch& batch = plan.batch;
    ++batch.blocks;
    if (blocks_[block_id].last_migration == 0) take_chunk(block_id, plan);
    Block& block = blocks_[block_id];
    const BlockMask new_faulted = faulted.without(block.resident);
    const BlockMask prefetched =
        prefetch_ ? uvm_prefetch_pages(block.resident, faulted, threshold_).without(block.resident)
                  : BlockMask{};
    batch.pages_faulted += new_faulted.count();
    batch.pages_prefetched += prefetched.count();
    BlockPages migration{block_id, new_faulted};
    migration.pages |= prefetched;
    if (migration.pages.count() != 0) plan.migrations.push_back(migration);
    block.resident |= migration.pages;
    lru_.erase(block.last_migration);
    block.last_migration = ++clock_;
    lru_[block.last_migration] = block_id;
  }

  /// Gives the block a 2 MB chunk, evicting the chunk migrated into longest ago when full.
  void take_chunk(std::uint64_t block_id, UvmPlan& plan) {
    if (chunks_in_use_ >= capacity_ && !lru_.empty()) {
      plan.evictions.push_back(evict_oldest());
      plan.batch.pages_evicted += plan.evictions.back().pages.count();
      ++plan.batch.chunks_evicted;
    }
    ++chunks_in_use_;
    blocks_[block_id].last_migration = ++clock_;
    lru_[clock_] = block_id;
  }

  /// Gives up the chunk migrated into longest ago (there is one); returns its block and pages.
  BlockPages evict_oldest() {
    const auto oldest = lru_.begin();
    Block& victim = blocks_[oldest->second];
    const BlockPages evicted{oldest->second, victim.resident};
    victim = Block{};
    lru_.erase(oldest);
    --chunks_in_use_;
    return evicted;
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

}  // namespace warpvm::detail
