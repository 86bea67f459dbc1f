#include "host_batched_service.hpp"

#include "core/nvtx_range.hpp"

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/policy/eviction_order.hpp"
#include "warpvm/error.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace warpvm::detail {
namespace {

// Posts outstanding at once: one per page per warp, so up to 32 per resident warp (270 K on an
// H200 at full occupancy); past this, posters wait for the host to take older ones.
constexpr std::uint32_t ring_capacity = 1u << 18;
constexpr std::uint64_t chunk_frames = uvm_block_pages;
constexpr std::uint64_t page_bytes = 4096;  // Config::validate: host_batched serves 4 KB pages
// How long a batch waits for the device to carry out the eviction orders its blocks need before
// it serves what it can and leaves those blocks queued for a later batch. Bounded, so that a
// chunk pinned by a long hold (a span kept while its warp waits for another fault) delays only
// the blocks waiting for that chunk, never the service. It is also how long an order may keep
// blocks waiting before it is withdrawn: element accesses hold a page for one operation, and
// waiting warps pass over every outstanding order each round of their wait (at most 256 ns
// apart), so an order still short of pages after thousands of such passes has a page held
// across a wait (a span or cursor whose warp waits for another fault), which may never end
// while the blocks waiting for this chunk are not served.
constexpr auto eviction_wait = std::chrono::milliseconds(2);
// Acknowledged orders finished together (their dirty bits read with one synchronisation).
constexpr std::size_t reap_group = 64;

std::uint32_t power_of_two_at_least(std::uint64_t n) {
  std::uint32_t p = 1;
  while (p < n) p *= 2;
  return p;
}

std::uint64_t nanoseconds(std::chrono::steady_clock::duration d) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

std::uint64_t page_count(const ServedObject& object) { return (object.bytes + page_bytes - 1) / page_bytes; }

/// Pages of `object` in the block whose first page is `block_page` (its last block may be partial).
unsigned pages_in_block(const ServedObject& object, std::uint64_t block_page) {
  return static_cast<unsigned>(std::min<std::uint64_t>(uvm_block_pages, page_count(object) - block_page));
}

/// Pages [first, end) of a block, to be copied as one: bytes [offset, offset + length) of the
/// object (the object's last page may be partial).
struct PageRun {
  unsigned first;
  unsigned end;
  std::uint64_t offset;
  std::uint64_t length;
};

/// Calls copy(run) for each run of pages p < `limit` with in_run(p) in the block of `object`
/// whose first page is `block_page`. Returns the pages in runs.
template <class InRun, class Copy>
std::uint64_t for_each_run(const ServedObject& object, std::uint64_t block_page, unsigned limit, InRun in_run,
                           Copy copy) {
  std::uint64_t pages = 0;
  for (unsigned p = 0; p < limit;) {
    if (!in_run(p)) {
      ++p;
      continue;
    }
    unsigned end = p + 1;
    while (end < limit && in_run(end)) ++end;
    const std::uint64_t offset = (block_page + p) * page_bytes;
    copy(PageRun{p, end, offset, std::min<std::uint64_t>(std::uint64_t{end - p} * page_bytes, object.bytes - offset)});
    pages += end - p;
    p = end;
  }
  return pages;
}

}  // namespace

HostBatchedService::HostBatchedService(const Config& config, std::byte* frames, std::uint64_t* frame_owners,
                                       std::uint32_t* frame_dirty, std::uint32_t frame_count)
    : config_(config),
      frames_(frames),
      frame_owners_(frame_owners),
      frame_dirty_(frame_dirty),
      chunks_(frame_count / chunk_frames),
      model_(chunks_, config.prefetch, config.fault_batch_size) {
  WARPVM_EXPECTS(chunks_ >= 1, ErrorKind::invalid_config,
                 "the host_batched transport serves whole 2 MB chunks: the cache needs at least 2 MiB");
  stream_ = make_stream();
  slots_ = make_pinned_zeroed<std::uint64_t>(ring_capacity, cudaHostAllocMapped, "the fault buffer");
  replay_ = make_device_zeroed<ReplayState>(1, "the replay state");
  staged_replay_ = make_pinned_zeroed<ReplayState>(1, cudaHostAllocDefault, "the staged replay state");
  next_position_ = make_device_zeroed<std::uint64_t>(1, "the fault buffer position");
  // A batch touches at most one block per fault, and at most as many blocks as there are chunks.
  staged_capacity_ = std::size_t{std::min<std::uint64_t>(config.fault_batch_size, chunks_)} * uvm_block_pages;
  staged_owners_ = make_pinned_zeroed<std::uint64_t>(staged_capacity_, cudaHostAllocDefault, "staged frame owners");
  staged_entries_ = make_pinned_zeroed<PageEntry>(staged_capacity_, cudaHostAllocDefault, "staged page entries");
  // At most one order per chunk is outstanding (its chunk is reused only once it is complete).
  order_capacity_ = power_of_two_at_least(chunks_);
  orders_ = make_device_zeroed<EvictionOrder>(order_capacity_, "the eviction orders");
  order_progress_ = make_device_zeroed<EvictionProgress>(order_capacity_, "the eviction order progress");
  order_acks_ = make_pinned_zeroed<EvictionAck>(order_capacity_, cudaHostAllocMapped, "the eviction acknowledgements");
  staged_orders_ = make_pinned_zeroed<EvictionOrder>(order_capacity_, cudaHostAllocDefault, "staged eviction orders");
  staged_progress_ =
      make_pinned_zeroed<EvictionProgress>(order_capacity_, cudaHostAllocDefault, "staged eviction progress");
  staged_dirty_ = make_pinned_zeroed<std::uint32_t>(std::size_t{reap_group} * chunk_frames, cudaHostAllocDefault,
                                                    "staged dirty bits");
  absent_entries_ = make_pinned_zeroed<PageEntry>(chunk_frames, cudaHostAllocDefault, "absent page entries");
  eviction_ring_ = make_device_zeroed<EvictionRing>(1, "the eviction ring");
  const EvictionRing eviction_ring{orders_.get(), order_progress_.get(), on_device(order_acks_.get()), order_capacity_};
  WARPVM_CUDA_TRY(cudaMemcpy(eviction_ring_.get(), &eviction_ring, sizeof eviction_ring, cudaMemcpyHostToDevice));
  ring_ = FaultRing{on_device(slots_.get()), next_position_.get(), replay_.get(), eviction_ring_.get(), ring_capacity};
  free_chunks_.reserve(chunks_);
  for (std::uint64_t c = chunks_; c-- > 0;) free_chunks_.push_back(static_cast<std::uint32_t>(c));
  thread_ = start_thread([this] { run(); }, "the host_batched service thread");
}

HostBatchedService::~HostBatchedService() {
  stop_.store(true);
  thread_.join();
}

void HostBatchedService::set_object(const std::unique_lock<std::mutex>& /*paused*/, std::uint32_t id,
                                    const ServedObject* object) {
  // The bookkeeping below runs even when the device cannot be told (a kernel failed): the
  // service must never keep an object it was told to forget. The failure is raised after it.
  std::exception_ptr device_failure;
  try {
    flush_posts();
  } catch (const Error&) {
    device_failure = std::current_exception();
  }
  auto of_object = [id](std::uint64_t block) { return key_object(block * uvm_block_pages) == id; };
  model_.forget_blocks(of_object);
  // The runtime settled the orders for this object's blocks before dropping its pages.
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (of_object(it->first)) {
      if (it->second.chunk != no_chunk) free_chunks_.push_back(it->second.chunk);
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(queue_, of_object);
  if (object != nullptr)
    objects_[id] = *object;
  else
    objects_.erase(id);
  std::uint64_t needed = 0;
  for (const auto& [served, o] : objects_) needed += chunks_for_bytes(o.bytes);
  chunks_needed_.store(needed);
  if (device_failure) std::rethrow_exception(device_failure);
}

std::pair<std::uint64_t, std::uint64_t> HostBatchedService::unsettled_orders(
    const std::unique_lock<std::mutex>& /*paused*/) const {
  const std::uint64_t first = staged_replay_->orders_complete;  // what the device was told last
  return {first, orders_posted_ - first};
}

void HostBatchedService::settle_orders(const std::unique_lock<std::mutex>& /*paused*/) {
  FaultBatch between_kernels;  // no batch to record it on
  reap_orders(between_kernels, /*kernels_stopped=*/true);
  WARPVM_EXPECTS(pending_orders_.empty(), ErrorKind::cuda,
                 "the host_batched transport's eviction orders were not all carried out before a drop");
  flush_posts();  // tells the device orders_complete
}

std::vector<FaultBatch> HostBatchedService::batches() const {
  const std::lock_guard lock(mutex_);
  return batches_;
}

void HostBatchedService::clear_batches() {
  const std::lock_guard lock(mutex_);
  flush_posts();
  batches_.clear();
  run_started_ = false;
}

void HostBatchedService::reset_totals() {
  const std::lock_guard lock(mutex_);
  flush_posts();
  pages_in_.store(0);
  bytes_in_.store(0);
  pages_evicted_.store(0);
  pages_out_.store(0);
  bytes_out_.store(0);
}

void HostBatchedService::raise_failure() const {
  const std::lock_guard lock(mutex_);
  if (!failure_.empty())
    throw_error(failure_kind_, "the host_batched service thread failed: " + failure_, __FILE__, __LINE__);
}

void HostBatchedService::fail(ErrorKind kind, const std::string& what) {
  const std::lock_guard lock(mutex_);
  if (!failure_.empty()) return;
  failure_kind_ = kind;
  failure_ = what;
}

std::size_t HostBatchedService::flush_posts() {
  std::vector<std::uint64_t> flushed;
  std::size_t count = 0;
  for (std::size_t taken = 0; (taken = take_faults(flushed, ring_capacity)) != 0; flushed.clear()) count += taken;
  staged_replay_->consumed = taken_position_;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(replay_.get(), staged_replay_.get(), sizeof(ReplayState), cudaMemcpyHostToDevice,
                                  stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
  return count;
}

std::size_t HostBatchedService::take_faults(std::vector<std::uint64_t>& out, std::size_t limit) {
  std::size_t taken = 0;
  for (; taken < limit; ++taken) {
    std::atomic_ref<std::uint64_t> slot(slots_.get()[taken_position_ & (ring_capacity - 1)]);
    const std::uint64_t posted = slot.load(std::memory_order_acquire);
    if (posted == 0) break;
    out.push_back(posted - 1);  // the page key
    slot.store(0, std::memory_order_release);
    ++taken_position_;
  }
  return taken;
}

void HostBatchedService::run() {
  if (const cudaError_t status = cudaSetDevice(config_.device); status != cudaSuccess) {
    fail(ErrorKind::cuda, "cudaSetDevice(" + std::to_string(config_.device) + "): " + cudaGetErrorString(status));
    return;
  }
  auto idle_since = Clock::now();
  std::vector<std::uint64_t> faults;
  while (!stop_.load(std::memory_order_relaxed)) {
    {
      std::unique_lock lock(mutex_);
      faults.clear();
      const auto started = Clock::now();
      if (take_faults(faults, config_.fault_batch_size) != 0) {
        std::string failure;
        ErrorKind kind = ErrorKind::cuda;
        try {
          serve(std::move(faults), started);
        } catch (const Error& e) {
          kind = e.kind();
          failure = e.what();
        } catch (const std::bad_alloc&) {
          kind = ErrorKind::out_of_memory;
          failure = "out of host memory while serving a batch";
        } catch (const std::exception& e) {
          failure = e.what();
        }
        faults = {};
        idle_since = Clock::now();
        if (failure.empty()) continue;
        lock.unlock();
        fail(kind, failure);  // the waiting warps time out; synchronize() raises this first
        return;
      }
    }
    // Spin briefly after activity (faults come in bursts), then poll at a gentler rate.
    if (Clock::now() - idle_since > std::chrono::milliseconds(1))
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::uint32_t HostBatchedService::evict_block(std::uint64_t block, bool& chunk_given_up) {
  const auto found = blocks_.find(block);
  chunk_given_up = found != blocks_.end() && found->second.chunk != no_chunk;
  if (found == blocks_.end()) return 0;
  const ServedBlock served = found->second;
  blocks_.erase(found);
  std::erase(queue_, block);  // pages not copied yet are simply not copied
  if (!chunk_given_up) return 0;
  const std::uint32_t pages = served.copied.count();
  if (pages == 0) {
    free_chunks_.push_back(served.chunk);
    return 0;
  }
  // At most one order per chunk is outstanding, and there are order_capacity_ >= chunks_
  // slots, so the slot's previous order is complete: the tag written first tells a warp that
  // still reads that order that it is gone (evict_order_pages).
  const std::uint64_t index = orders_posted_++;
  const std::uint32_t slot = static_cast<std::uint32_t>(index & (order_capacity_ - 1));
  staged_progress_.get()[slot] = EvictionProgress{eviction_order::initial_progress(index)};
  staged_orders_.get()[slot] = EvictionOrder{block * uvm_block_pages, pages, 0, served.copied};
  pending_orders_.push_back(PendingOrder{index, block, served.chunk, served.copied, Clock::now()});
  evicting_blocks_.insert(block);
  return pages;
}

void HostBatchedService::give_up_chunks(const std::vector<detail::BlockPages>& evictions, FaultBatch& batch) {
  const std::uint64_t first_order = orders_posted_;
  for (const detail::BlockPages& eviction : evictions) {
    bool chunk_given_up = false;
    batch.pages_evicted += evict_block(eviction.block, chunk_given_up);
    batch.chunks_evicted += chunk_given_up ? 1u : 0u;
  }
  if (orders_posted_ != first_order) publish_orders(first_order, orders_posted_ - first_order);
}

void HostBatchedService::publish_orders(std::size_t first, std::size_t count) {
  // Progress (with the new tags) first, then the orders, then orders_posted: stream order.
  for (int part = 0; part < 2; ++part) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t slot = (first + i) & (order_capacity_ - 1);
      if (part == 0)
        WARPVM_CUDA_TRY(cudaMemcpyAsync(order_progress_.get() + slot, staged_progress_.get() + slot,
                                        sizeof(EvictionProgress), cudaMemcpyHostToDevice, stream_.get()));
      else
        WARPVM_CUDA_TRY(cudaMemcpyAsync(orders_.get() + slot, staged_orders_.get() + slot, sizeof(EvictionOrder),
                                        cudaMemcpyHostToDevice, stream_.get()));
    }
  }
  staged_replay_->orders_posted = orders_posted_;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(replay_.get(), staged_replay_.get(), sizeof(ReplayState), cudaMemcpyHostToDevice,
                                  stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));  // staged_replay_ changes again later in the batch
}

void HostBatchedService::reap_orders(FaultBatch& batch, bool kernels_stopped) {
  std::vector<PendingOrder> evicted;
  std::vector<PendingOrder> withdrawn;
  std::erase_if(pending_orders_, [&](const PendingOrder& order) {
    EvictionAck& ack = order_acks_.get()[order.index & (order_capacity_ - 1)];
    const std::uint64_t sequence = std::atomic_ref(ack.sequence).load(std::memory_order_acquire);
    if (sequence == order.index + 1)
      evicted.push_back(order);  // asked to withdraw or not: every page was taken first
    else if (sequence == ((order.index + 1) | eviction_ack_cancelled))
      (kernels_stopped ? evicted : withdrawn).push_back(order);
    else
      return false;
    return true;
  });
  finish_evicted_orders(evicted, batch.pages_written_back);
  for (const PendingOrder& order : withdrawn) keep_withdrawn(order, batch);
  std::uint64_t complete = orders_posted_;
  for (const PendingOrder& order : pending_orders_) complete = std::min(complete, order.index);
  staged_replay_->orders_complete = complete;  // goes to the device with the next replay state
}

void HostBatchedService::finish_evicted_orders(const std::vector<PendingOrder>& acknowledged,
                                               std::uint32_t& written_back) {
  // Every page of these orders is BUSY on the device under an acknowledged eviction (no device
  // atomic changes it: takes and holds need VALID, give-backs a withdrawn order; nobody holds
  // it, and the holders' writes and dirty bits were released before the acknowledgement), or
  // no kernel runs: copies may now read and rewrite the pages and their words.
  for (std::size_t first = 0; first < acknowledged.size(); first += reap_group) {
    const std::size_t count = std::min(reap_group, acknowledged.size() - first);
    for (std::size_t i = 0; i < count; ++i)
      WARPVM_CUDA_TRY(cudaMemcpyAsync(staged_dirty_.get() + i * chunk_frames,
                                      frame_dirty_ + std::uint64_t{acknowledged[first + i].chunk} * chunk_frames,
                                      chunk_frames * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream_.get()));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    for (std::size_t i = 0; i < count; ++i) {
      const PendingOrder& order = acknowledged[first + i];
      const std::uint64_t first_key = order.block * uvm_block_pages;
      const ServedObject& object = objects_.at(key_object(first_key));  // dropped objects were settled first
      const std::uint64_t block_page = key_page(first_key);
      const std::uint64_t first_frame = std::uint64_t{order.chunk} * chunk_frames;
      const std::uint32_t* dirty = staged_dirty_.get() + i * chunk_frames;
      const std::uint64_t pages = for_each_run(
          object, block_page, uvm_block_pages, [&](unsigned p) { return order.pages.test(p) && dirty[p] != 0; },
          [&](const PageRun& run) {
            WARPVM_CUDA_TRY(cudaMemcpyAsync(object.host + run.offset, frames_ + (first_frame + run.first) * page_bytes,
                                            run.length, cudaMemcpyDeviceToHost, stream_.get()));
            bytes_out_.fetch_add(run.length);
          });
      written_back += static_cast<std::uint32_t>(pages);
      pages_out_.fetch_add(pages);
      WARPVM_CUDA_TRY(cudaMemsetAsync(frame_dirty_ + first_frame, 0, chunk_frames * sizeof(std::uint32_t), stream_.get()));
      WARPVM_CUDA_TRY(cudaMemcpyAsync(object.pages + block_page, absent_entries_.get(),
                                      pages_in_block(object, block_page) * sizeof(PageEntry), cudaMemcpyHostToDevice,
                                      stream_.get()));
      pages_evicted_.fetch_add(order.pages.count());
    }
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    for (std::size_t i = 0; i < count; ++i) {
      free_chunks_.push_back(acknowledged[first + i].chunk);
      evicting_blocks_.erase(acknowledged[first + i].block);
    }
  }
}

void HostBatchedService::keep_withdrawn(const PendingOrder& order, FaultBatch& batch) {
  // The device gave every page back (VALID, as it was): the block keeps its chunk and those
  // pages. It has no chunk meanwhile (a block with an order outstanding is given none); pages
  // the model migrated into it again since are queued, and are copied now unless they are these.
  evicting_blocks_.erase(order.block);
  ServedBlock& served = blocks_[order.block];
  served.chunk = order.chunk;
  served.copied = order.pages;
  served.queued = served.queued.without(order.pages);
  if (served.queued.count() == 0) std::erase(queue_, order.block);
  ++batch.orders_cancelled;
  give_up_chunks(model_.eviction_failed(order.block, order.pages), batch);
}

void HostBatchedService::withdraw_stuck_orders(Clock::time_point now) {
  bool asked = false;
  for (PendingOrder& order : pending_orders_) {
    if (order.withdrawing || now - order.posted < eviction_wait) continue;
    // Only the cancel word changes: the order's other fields stay as the device reads them.
    const std::size_t slot = order.index & (order_capacity_ - 1);
    staged_orders_.get()[slot].cancel = 1;
    WARPVM_CUDA_TRY(cudaMemcpyAsync(&orders_.get()[slot].cancel, &staged_orders_.get()[slot].cancel,
                                    sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream_.get()));
    order.withdrawing = true;
    asked = true;
  }
  if (asked) WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
}

bool HostBatchedService::queue_blocked() const {
  std::size_t free = free_chunks_.size();
  for (const std::uint64_t block : queue_) {
    if (evicting_blocks_.contains(block)) return true;
    if (blocks_.at(block).chunk != no_chunk) continue;
    if (free == 0) return true;
    --free;
  }
  return false;
}

void HostBatchedService::copy_queued(std::uint64_t& pages, std::uint64_t& bytes) {
  // In stream order: the data, then each block's page entries and its chunk's frame owners
  // (the device never writes owners under this transport). While nothing can be evicted the
  // entries are written for the whole block (no kernel holds or changes them); while eviction
  // is possible only those of the pages copied now, which are absent on the device and see no
  // atomics (host_batched.cuh): the other pages' words may be held.
  const bool whole_blocks = !evicts();
  std::size_t staged = 0;
  struct EntryCopy {
    const ServedObject* object;
    std::uint64_t first_page;  // in the object
    std::uint64_t first_frame;
    std::uint64_t page_count;
    std::size_t staged;
  };
  std::vector<EntryCopy> entries;
  std::vector<EntryCopy> owners;
  std::vector<std::uint64_t> still_queued;
  for (const std::uint64_t block : queue_) {
    ServedBlock& served = blocks_.at(block);
    const std::uint64_t first_key = block * uvm_block_pages;
    const ServedObject& object = objects_.at(key_object(first_key));  // posts were filtered
    const std::uint64_t block_page = key_page(first_key);
    const unsigned in_object = pages_in_block(object, block_page);
    const bool can_copy = !evicting_blocks_.contains(block) && (served.chunk != no_chunk || !free_chunks_.empty()) &&
                          staged + in_object <= staged_capacity_;
    if (!can_copy) {
      still_queued.push_back(block);
      continue;
    }
    if (served.chunk == no_chunk) {
      served.chunk = free_chunks_.back();
      free_chunks_.pop_back();
    }
    const std::uint64_t first_frame = std::uint64_t{served.chunk} * chunk_frames;
    pages += for_each_run(
        object, block_page, in_object, [&](unsigned p) { return served.queued.test(p); },
        [&](const PageRun& run) {
          WARPVM_CUDA_TRY(cudaMemcpyAsync(frames_ + (first_frame + run.first) * page_bytes, object.host + run.offset,
                                          run.length, cudaMemcpyHostToDevice, stream_.get()));
          bytes += run.length;
          if (whole_blocks) return;
          for (unsigned q = run.first; q < run.end; ++q)
            staged_entries_.get()[staged + q] = PageEntry{page_word::valid, static_cast<std::uint32_t>(first_frame + q)};
          entries.push_back(EntryCopy{&object, block_page + run.first, first_frame + run.first, run.end - run.first,
                                      staged + run.first});
        });
    served.copied |= served.queued;
    served.queued = BlockMask{};
    for (unsigned p = 0; p < in_object; ++p) {
      const bool here = served.copied.test(p);
      staged_owners_.get()[staged + p] = here ? first_key + p : empty_page_key;
      if (whole_blocks)
        staged_entries_.get()[staged + p] =
            here ? PageEntry{page_word::valid, static_cast<std::uint32_t>(first_frame + p)} : PageEntry{0, 0};
    }
    if (whole_blocks) entries.push_back(EntryCopy{&object, block_page, first_frame, in_object, staged});
    owners.push_back(EntryCopy{&object, block_page, first_frame, in_object, staged});
    staged += in_object;
  }
  queue_ = std::move(still_queued);
  for (const EntryCopy& o : owners)
    WARPVM_CUDA_TRY(cudaMemcpyAsync(frame_owners_ + o.first_frame, staged_owners_.get() + o.staged,
                                    o.page_count * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream_.get()));
  for (const EntryCopy& e : entries)
    WARPVM_CUDA_TRY(cudaMemcpyAsync(e.object->pages + e.first_page, staged_entries_.get() + e.staged,
                                    e.page_count * sizeof(PageEntry), cudaMemcpyHostToDevice, stream_.get()));
}

void HostBatchedService::serve(std::vector<std::uint64_t> faults, Clock::time_point started) {
  const NvtxRange range("warpvm: uvm fault batch", faults.size());
  // Posts for objects that are no longer served, or past an object's end (a stale post whose
  // object id was reused), must not reach the model: it would think their blocks resident.
  std::erase_if(faults, [&](std::uint64_t key) {
    const auto object = objects_.find(key_object(key));
    return object == objects_.end() || key_page(key) >= page_count(object->second);
  });
  if (!run_started_) {
    run_start_ = started;
    run_started_ = true;
  }
  detail::UvmPlan plan = model_.service(std::move(faults));

  // The model's decisions: the chunks it gave up (LRU by last migration), then the pages it
  // migrated, queued per block until the block has a chunk whose previous pages are gone. The
  // plan lists evictions and migrations apart: a block evicted in this batch after its own
  // migration is not resident in the model any more, and its migration is skipped (its warps
  // fault again); one evicted from an earlier batch's chunk and migrated again here is both
  // ordered evicted and queued, and waits for its order (or, if the order is withdrawn, keeps
  // the pages it had and is queued the others). Withdrawn orders give the model its chunks back
  // here too, and it may give up others instead (all counted on this batch).
  plan.batch.chunks_evicted = 0;
  plan.batch.pages_evicted = 0;
  reap_orders(plan.batch, /*kernels_stopped=*/false);
  give_up_chunks(plan.evictions, plan.batch);
  for (const detail::BlockPages& migration : plan.migrations) {
    const std::uint64_t first_key = migration.block * uvm_block_pages;
    const unsigned in_object = pages_in_block(objects_.at(key_object(first_key)), key_page(first_key));
    // The model sees whole blocks: what it prefetched past the object's end is not copied.
    plan.batch.pages_prefetched -= migration.pages.count_in(in_object, uvm_block_pages - in_object);
    if (model_.resident_pages(migration.block).count() == 0) continue;
    BlockMask inside;
    inside.fill(0, in_object);
    ServedBlock& served = blocks_[migration.block];
    // Not the pages a withdrawn order left it (copied, and VALID on the device).
    const BlockMask added = migration.pages.without(migration.pages.without(inside)).without(served.copied);
    if (added.count() == 0) continue;
    if (served.queued.count() == 0) queue_.push_back(migration.block);
    served.queued |= added;
  }

  // Wait, boundedly, for the orders the queued blocks need (the warps waiting for this batch's
  // faults carry them out), then copy what can be copied.
  const auto evicting = Clock::now();
  const auto deadline = evicting + eviction_wait;
  while (queue_blocked() && !pending_orders_.empty() && Clock::now() < deadline) {
    std::this_thread::yield();
    reap_orders(plan.batch, /*kernels_stopped=*/false);
  }
  if (queue_blocked()) withdraw_stuck_orders(Clock::now());
  const auto transferring = Clock::now();
  std::uint64_t bytes = 0;
  std::uint64_t pages = 0;
  copy_queued(pages, bytes);

  // Replay: drop what is left in the buffer (those warps post again once they see the new
  // epoch, which lands after the pages in stream order), then let them go.
  staged_replay_->epoch += 1;
  plan.batch.faults_flushed = static_cast<std::uint32_t>(flush_posts());
  const auto replayed = Clock::now();

  plan.batch.start_ns = nanoseconds(started - run_start_);
  plan.batch.duration_ns = nanoseconds(replayed - started);
  plan.batch.transfer_ns = nanoseconds(replayed - transferring);
  plan.batch.eviction_ns = nanoseconds(transferring - evicting);
  batches_.push_back(plan.batch);
  pages_in_.fetch_add(pages);
  bytes_in_.fetch_add(bytes);
}

}  // namespace warpvm::detail
