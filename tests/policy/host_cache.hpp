#pragma once
// A page cache in plain host memory driven by the same page-table and victim code the kernels
// use, one thread standing in for one lane. Lets CI exercise the protocol with real concurrency.

#include "warpvm/detail/core/frame_table.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/policy/victim.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace warpvm::detail::testing {

struct HostCache {
  HostCache(std::uint32_t frame_count, std::uint32_t pages, std::uint32_t words, EvictionPolicy eviction)
      : policy(eviction),
        words_per_page(words),
        owner(frame_count, empty_page_key),
        lock(frame_count, 0),
        referenced(frame_count, 0),
        dirty(frame_count, 0),
        frame_data(std::size_t{frame_count} * words, 0),
        page_state(pages, 0),
        page_frame(pages, 0),
        backing(std::size_t{pages} * words, 0) {
    table = FrameTable{owner.data(), lock.data(), referenced.data(), dirty.data(), &hand, frame_count};
  }

  std::uint32_t& word_of(std::uint64_t key) { return page_state[key_page(key)]; }
  std::uint32_t* frame_words(std::uint32_t f) { return frame_data.data() + std::size_t{f} * words_per_page; }

  /// Acquires `page` for one thread, loading it if absent; returns its frame.
  std::uint32_t acquire(std::uint32_t page, bool write) {
    std::uint32_t& word = page_state[page];
    const std::uint32_t before = page_acquire(word, 1);
    bool must_fill = classify(before) == AcquireOutcome::fetch && page_try_begin_fetch(word);
    while (!must_fill) {
      const std::uint32_t now = page_load(word);
      if (page_word::is_resident(now)) break;
      if (page_word::is_absent(now) && page_try_begin_fetch(word)) must_fill = true;
      else std::this_thread::yield();
    }
    std::uint32_t frame = 0;
    if (must_fill) {
      frame = fill(make_page_key(0, page));
    } else {
      frame = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(page_frame[page]).load(cuda::std::memory_order_relaxed);
      if (policy == EvictionPolicy::clock) table.set_referenced(frame, true);
    }
    if (write) table.set_dirty(frame, true);
    return frame;
  }

  void release(std::uint32_t page) { page_release(page_state[page], 1); }

  std::uint32_t fill(std::uint64_t key) {
    VictimSearch search{};
    do {
      search = find_victim(table, policy, 64, [&](std::uint64_t k) -> std::uint32_t& { return word_of(k); });
      if (!search.found) std::this_thread::yield();
    } while (!search.found);
    const Victim v = search.victim;
    if (v.evicts()) {
      if (v.dirty) std::memcpy(&backing[key_page(v.evicted_key) * words_per_page], frame_words(v.frame), words_per_page * 4);
      page_finish_evict(word_of(v.evicted_key));
      ++evictions;
    }
    const std::uint64_t page = key_page(key);
    std::memcpy(frame_words(v.frame), &backing[page * words_per_page], words_per_page * 4);
    table.set_dirty(v.frame, false);
    table.set_owner(v.frame, key);
    table.set_referenced(v.frame, false);
    cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(page_frame[page]).store(v.frame, cuda::std::memory_order_relaxed);
    table.unlock(v.frame);
    page_finish_fetch(word_of(key));
    return v.frame;
  }

  /// Writes every dirty frame back (no other thread running).
  void flush() {
    for (std::uint32_t f = 0; f < table.count; ++f)
      if (owner[f] != empty_page_key && dirty[f] != 0)
        std::memcpy(&backing[key_page(owner[f]) * words_per_page], frame_words(f), words_per_page * 4);
  }

  EvictionPolicy policy;
  std::uint32_t words_per_page;
  std::vector<std::uint64_t> owner;
  std::vector<std::uint32_t> lock, referenced, dirty;
  std::uint64_t hand = 0;
  std::vector<std::uint32_t> frame_data;
  std::vector<std::uint32_t> page_state, page_frame;
  std::vector<std::uint32_t> backing;
  std::atomic<std::uint64_t> evictions{0};
  FrameTable table{};
};

}  // namespace warpvm::detail::testing
