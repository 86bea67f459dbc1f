#pragma once
/// @file
/// The device page cache modelled in host memory, driven by the same page-table and victim
/// code the kernels run. One calling thread stands in for one lane (or one warp leader).
/// Used by the simulator (warpvm-sim) to replay access patterns at any cache size without a
/// GPU, and by host tests to exercise the protocol with real concurrency.

#include "warpvm/config.hpp"
#include "warpvm/detail/core/frame_table.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/policy/victim.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace warpvm::sim {

/// Counters in the same sense as warpvm::Stats.
struct ModelCounts {
  std::uint64_t misses = 0;
  std::uint64_t loads = 0;  ///< misses whose contents were read from host memory (not overwrites)
  std::uint64_t hits = 0;
  std::uint64_t evictions = 0;
  std::uint64_t writebacks = 0;
};

class PageCacheModel {
 public:
  /// `words_per_page` 32-bit words of data per page; 0 models metadata only (counts, no data).
  PageCacheModel(std::uint32_t frame_count, EvictionPolicy policy, std::uint32_t words_per_page = 0)
      : policy_(policy),
        words_per_page_(words_per_page),
        owner_(frame_count, detail::empty_page_key),
        lock_(frame_count, 0),
        referenced_(frame_count, 0),
        dirty_(frame_count, 0),
        frame_data_(std::size_t{frame_count} * words_per_page, 0) {
    table_ = detail::FrameTable{owner_.data(), lock_.data(), referenced_.data(), dirty_.data(), &hand_, frame_count};
  }
  PageCacheModel(const PageCacheModel&) = delete;
  PageCacheModel& operator=(const PageCacheModel&) = delete;

  /// Registers an object of `pages` pages (not thread-safe; before any acquire).
  std::uint32_t add_object(std::uint64_t pages) {
    objects_.push_back(Object{std::vector<std::uint32_t>(pages, 0), std::vector<std::uint32_t>(pages, 0),
                              std::vector<std::uint32_t>(pages * words_per_page_, 0)});
    return static_cast<std::uint32_t>(objects_.size() - 1);
  }

  /// Acquires a page, loading it (and evicting another) if absent; returns its frame.
  /// `overwrite`: the holder writes the whole page, so an absent page is not read first.
  std::uint32_t acquire(std::uint32_t object, std::uint64_t page, bool write, bool overwrite = false) {
    std::uint32_t& word = objects_[object].page_state[page];
    const detail::AcquireOutcome outcome = detail::classify(detail::page_acquire(word, 1));
    bool must_fill = outcome == detail::AcquireOutcome::fetch && detail::page_try_begin_fetch(word);
    const bool hit = outcome == detail::AcquireOutcome::hit;
    while (!must_fill && !hit) {
      const std::uint32_t now = detail::page_load(word);
      if (detail::page_word::is_resident(now)) break;
      if (detail::page_word::is_absent(now) && detail::page_try_begin_fetch(word)) must_fill = true;
      else std::this_thread::yield();
    }
    std::uint32_t frame = 0;
    if (must_fill) {
      frame = fill(detail::make_page_key(object, page), !overwrite);
    } else {
      frame = frame_of(object, page);
      if (hit) hits_.fetch_add(1, std::memory_order_relaxed);
      if (policy_ == EvictionPolicy::clock) table_.set_referenced(frame, true);
    }
    if (write || overwrite) table_.set_dirty(frame, true);
    return frame;
  }

  void release(std::uint32_t object, std::uint64_t page) { detail::page_release(objects_[object].page_state[page], 1); }

  /// Writes every dirty frame back (no other thread may run).
  void flush() {
    for (std::uint32_t f = 0; f < table_.count; ++f) {
      if (owner_[f] == detail::empty_page_key || dirty_[f] == 0) continue;
      write_back(f, owner_[f]);
      dirty_[f] = 0;
    }
  }

  [[nodiscard]] ModelCounts counts() const {
    return {misses_.load(), loads_.load(), hits_.load(), evictions_.load(), writebacks_.load()};
  }
  [[nodiscard]] const detail::FrameTable& table() const { return table_; }
  [[nodiscard]] std::uint64_t frame_owner(std::uint32_t f) const { return owner_[f]; }
  [[nodiscard]] std::uint32_t page_word(std::uint32_t object, std::uint64_t page) const {
    return objects_[object].page_state[page];
  }
  std::uint32_t* frame_words(std::uint32_t f) { return frame_data_.data() + std::size_t{f} * words_per_page_; }
  std::uint32_t* backing(std::uint32_t object, std::uint64_t page) {
    return objects_[object].backing.data() + page * words_per_page_;
  }
  /// One bounded victim search over the model's frames (what a faulting warp runs).
  detail::VictimSearch search_victim(std::uint32_t probe_budget, bool free_only = false) {
    return detail::find_victim(table_, policy_, free_only, probe_budget,
                               [&](std::uint64_t k) -> std::uint32_t& { return word_of(k); });
  }

  /// For tests that stage a scenario by hand.
  void set_hand(std::uint64_t ticket) { hand_ = ticket; }
  [[nodiscard]] std::uint64_t hand() const { return hand_; }
  [[nodiscard]] bool lock_held(std::uint32_t f) const { return lock_[f] != 0; }

 private:
  struct Object {
    std::vector<std::uint32_t> page_state, page_frame, backing;
  };

  std::uint32_t& word_of(std::uint64_t key) { return objects_[detail::key_object(key)].page_state[detail::key_page(key)]; }
  std::uint32_t frame_of(std::uint32_t object, std::uint64_t page) {
    return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(objects_[object].page_frame[page])
        .load(cuda::std::memory_order_relaxed);
  }
  void write_back(std::uint32_t f, std::uint64_t key) {
    if (words_per_page_ != 0)
      std::memcpy(backing(detail::key_object(key), detail::key_page(key)), frame_words(f), words_per_page_ * 4);
    writebacks_.fetch_add(1, std::memory_order_relaxed);
  }

  std::uint32_t fill(std::uint64_t key, bool load_contents) {
    detail::VictimSearch search{};
    do {
      search = search_victim(1024);
      if (!search.found) std::this_thread::yield();
    } while (!search.found);
    const detail::Victim v = search.victim;
    if (v.evicts()) {
      if (v.dirty) write_back(v.frame, v.evicted_key);
      detail::page_finish_evict(word_of(v.evicted_key));
      evictions_.fetch_add(1, std::memory_order_relaxed);
    }
    const std::uint32_t object = detail::key_object(key);
    const std::uint64_t page = detail::key_page(key);
    if (load_contents) {
      if (words_per_page_ != 0) std::memcpy(frame_words(v.frame), backing(object, page), words_per_page_ * 4);
      loads_.fetch_add(1, std::memory_order_relaxed);
    }
    table_.set_dirty(v.frame, false);
    table_.set_owner(v.frame, key);
    table_.set_referenced(v.frame, false);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(objects_[object].page_frame[page])
        .store(v.frame, cuda::std::memory_order_relaxed);
    table_.unlock(v.frame);
    detail::page_finish_fetch(word_of(key));
    misses_.fetch_add(1, std::memory_order_relaxed);
    return v.frame;
  }

  EvictionPolicy policy_;
  std::uint32_t words_per_page_;
  std::vector<std::uint64_t> owner_;
  std::vector<std::uint32_t> lock_, referenced_, dirty_;
  std::uint64_t hand_ = 0;
  std::vector<std::uint32_t> frame_data_;
  std::vector<Object> objects_;
  detail::FrameTable table_{};
  std::atomic<std::uint64_t> misses_{0}, loads_{0}, hits_{0}, evictions_{0}, writebacks_{0};
};

}  // namespace warpvm::sim
