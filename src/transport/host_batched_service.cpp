#include "host_batched_service.hpp"

#include "nvtx_range.hpp"

#include "warpvm/detail/core/geometry.hpp"
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
constexpr std::uint64_t page_bytes = 4096;

std::uint64_t nanoseconds(std::chrono::steady_clock::duration d) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace

HostBatchedService::HostBatchedService(const Config& config, std::byte* frames, std::uint64_t* frame_owners,
                                       std::uint32_t frame_count)
    : config_(config),
      frames_(frames),
      frame_owners_(frame_owners),
      chunks_(frame_count / chunk_frames),
      model_(std::max<std::uint64_t>(frame_count / chunk_frames, 1), config.prefetch, config.fault_batch_size) {
  WARPVM_EXPECTS(chunks_ >= 1, ErrorKind::invalid_config,
                 "the host_batched transport serves whole 2 MB chunks: the cache needs at least 2 MiB");
  cudaStream_t created = nullptr;
  WARPVM_CUDA_TRY(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
  stream_.reset(created);
  slots_ = make_pinned_zeroed<std::uint64_t>(ring_capacity, cudaHostAllocMapped, "the fault buffer");
  replay_ = make_device_zeroed<ReplayState>(1, "the replay state");
  staged_replay_ = make_pinned_zeroed<ReplayState>(1, cudaHostAllocDefault, "the staged replay state");
  next_position_ = make_device_zeroed<std::uint64_t>(1, "the fault buffer position");
  // A batch touches at most one block per fault, and at most as many blocks as there are chunks.
  staged_capacity_ = std::size_t{std::min<std::uint64_t>(config.fault_batch_size, chunks_)} * uvm_block_pages;
  staged_owners_ = make_pinned_zeroed<std::uint64_t>(staged_capacity_, cudaHostAllocDefault, "staged frame owners");
  staged_entries_ = make_pinned_zeroed<PageEntry>(staged_capacity_, cudaHostAllocDefault, "staged page entries");
  ring_ = FaultRing{on_device(slots_.get()), next_position_.get(), replay_.get(), ring_capacity};
  free_chunks_.reserve(chunks_);
  for (std::uint64_t c = chunks_; c-- > 0;) free_chunks_.push_back(static_cast<std::uint32_t>(c));
  thread_ = std::thread([this] { run(); });
}

HostBatchedService::~HostBatchedService() {
  stop_.store(true);
  thread_.join();
}

void HostBatchedService::set_object(const std::unique_lock<std::mutex>& /*paused*/, std::uint32_t id,
                                    const ServedObject* object) {
  drop_stale_posts();
  auto of_object = [id](std::uint64_t block) { return key_object(block * uvm_block_pages) == id; };
  model_.forget_blocks(of_object);
  for (auto it = chunk_of_block_.begin(); it != chunk_of_block_.end();) {
    if (of_object(it->first)) {
      free_chunks_.push_back(it->second);
      it = chunk_of_block_.erase(it);
    } else {
      ++it;
    }
  }
  if (object != nullptr)
    objects_[id] = *object;
  else
    objects_.erase(id);
  constexpr std::uint64_t chunk_bytes = chunk_frames * page_bytes;
  std::uint64_t needed = 0;
  for (const auto& [served, o] : objects_) needed += (o.bytes + chunk_bytes - 1) / chunk_bytes;
  chunks_needed_.store(needed);
}

std::vector<FaultBatch> HostBatchedService::batches() const {
  const std::lock_guard lock(mutex_);
  return batches_;
}

void HostBatchedService::clear_batches() {
  const std::lock_guard lock(mutex_);
  drop_stale_posts();
  batches_.clear();
  run_started_ = false;
}

void HostBatchedService::reset_totals() {
  const std::lock_guard lock(mutex_);
  drop_stale_posts();
  pages_in_.store(0);
  bytes_in_.store(0);
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

void HostBatchedService::drop_stale_posts() {
  std::vector<std::uint64_t> stale;
  while (take_faults(stale, ring_capacity) != 0) stale.clear();
  staged_replay_->consumed = taken_position_;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(replay_.get(), staged_replay_.get(), sizeof(ReplayState), cudaMemcpyHostToDevice,
                                  stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
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

std::uint32_t HostBatchedService::chunk_for(std::uint64_t block) {
  const auto found = chunk_of_block_.find(block);
  if (found != chunk_of_block_.end()) return found->second;
  // The runtime refuses launches whose objects need more chunks than the cache has.
  WARPVM_EXPECTS(!free_chunks_.empty(), ErrorKind::no_progress, "the host_batched transport ran out of 2 MB chunks");
  const std::uint32_t chunk = free_chunks_.back();
  free_chunks_.pop_back();
  chunk_of_block_.emplace(block, chunk);
  return chunk;
}

void HostBatchedService::serve(std::vector<std::uint64_t> faults, Clock::time_point started) {
  const NvtxRange range("warpvm: uvm fault batch", faults.size());
  // Posts for objects that are no longer served, or past an object's end (a stale post whose
  // object id was reused), must not reach the model: it would think their blocks resident.
  std::erase_if(faults, [&](std::uint64_t key) {
    const auto object = objects_.find(key_object(key));
    return object == objects_.end() || key_page(key) >= (object->second.bytes + page_bytes - 1) / page_bytes;
  });
  if (!run_started_) {
    run_start_ = started;
    run_started_ = true;
  }
  sim::UvmPlan plan = model_.service(std::move(faults));
  WARPVM_EXPECTS(plan.evictions.empty(), ErrorKind::no_progress,
                 "the host_batched transport would have to evict, which it does not implement yet");

  // The data: one copy per run of consecutive migrated pages. Then, in stream order (so only
  // after the data has landed), each block's page entries and its chunk's frame owners whole,
  // from the model's residency (the device never writes them under this transport); the
  // entries release the waiting warps.
  const auto managed = Clock::now();
  std::uint64_t bytes = 0;
  std::uint64_t pages = 0;
  std::size_t staged = 0;
  struct BlockUpdate {
    const ServedObject* object;
    std::uint64_t first_page;   // in the object
    std::uint64_t first_frame;
    std::uint64_t page_count;   // pages of the block inside the object
    std::size_t staged;
  };
  std::vector<BlockUpdate> updates;
  for (const sim::BlockPages& migration : plan.migrations) {
    const std::uint64_t first_key = migration.block * uvm_block_pages;
    const ServedObject& object = objects_.at(key_object(first_key));  // posts were filtered above
    const std::uint64_t block_page = key_page(first_key);
    const std::uint64_t object_pages = (object.bytes + page_bytes - 1) / page_bytes;
    const auto in_object = static_cast<unsigned>(std::min<std::uint64_t>(uvm_block_pages, object_pages - block_page));
    const std::uint64_t first_frame = std::uint64_t{chunk_for(migration.block)} * chunk_frames;
    // The model sees whole blocks: what it prefetched past the object's end is not copied.
    plan.batch.pages_prefetched -= migration.pages.count_in(in_object, uvm_block_pages - in_object);
    for (unsigned p = 0; p < in_object;) {
      if (!migration.pages.test(p)) {
        ++p;
        continue;
      }
      unsigned end = p;
      while (end < in_object && migration.pages.test(end)) ++end;
      const std::uint64_t offset = (block_page + p) * page_bytes;
      const std::uint64_t length = std::min<std::uint64_t>(std::uint64_t{end - p} * page_bytes, object.bytes - offset);
      WARPVM_CUDA_TRY(cudaMemcpyAsync(frames_ + (first_frame + p) * page_bytes, object.host + offset, length,
                                      cudaMemcpyHostToDevice, stream_.get()));
      bytes += length;
      pages += end - p;
      p = end;
    }
    const BlockMask resident = model_.resident_pages(migration.block);
    for (unsigned p = 0; p < in_object; ++p) {
      const bool here = resident.test(p);
      staged_owners_.get()[staged + p] = here ? first_key + p : empty_page_key;
      staged_entries_.get()[staged + p] =
          here ? PageEntry{page_word::valid, static_cast<std::uint32_t>(first_frame + p)} : PageEntry{0, 0};
    }
    updates.push_back(BlockUpdate{&object, block_page, first_frame, in_object, staged});
    staged += in_object;
  }
  for (const BlockUpdate& u : updates) {
    WARPVM_CUDA_TRY(cudaMemcpyAsync(frame_owners_ + u.first_frame, staged_owners_.get() + u.staged,
                                    u.page_count * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream_.get()));
    WARPVM_CUDA_TRY(cudaMemcpyAsync(u.object->pages + u.first_page, staged_entries_.get() + u.staged,
                                    u.page_count * sizeof(PageEntry), cudaMemcpyHostToDevice, stream_.get()));
  }

  // Replay: drop what is left in the buffer (those warps post again once they see the new
  // epoch, which lands after the pages in stream order), then let them go.
  std::vector<std::uint64_t> flushed;
  while (take_faults(flushed, ring_capacity) != 0) {
  }
  staged_replay_->consumed = taken_position_;
  staged_replay_->epoch += 1;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(replay_.get(), staged_replay_.get(), sizeof(ReplayState), cudaMemcpyHostToDevice,
                                  stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
  const auto replayed = Clock::now();

  plan.batch.faults_flushed = static_cast<std::uint32_t>(flushed.size());
  plan.batch.start_ns = nanoseconds(started - run_start_);
  plan.batch.duration_ns = nanoseconds(replayed - started);
  plan.batch.transfer_ns = nanoseconds(replayed - managed);
  batches_.push_back(plan.batch);
  pages_in_.fetch_add(pages);
  bytes_in_.fetch_add(bytes);
}

}  // namespace warpvm::detail
