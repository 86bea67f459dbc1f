// The host side of warpvm::channel: the owned buffers and the monitor thread (Monitor +
// Activator of the WIC design). docs/channels.md has the protocol.

#include "warpvm/channel.hpp"

#include "warpvm/detail/core/cuda_buffers.hpp"

#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/request_queue.hpp"
#include "warpvm/detail/channel/segment_tree.hpp"
#include "warpvm/detail/channel/waiting_lists.hpp"
#include "warpvm/error.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace warpvm::detail {
namespace {

/// Waiter entries whose indices lie this close share one copy (the words between are copied
/// with the values the device already has: only the copy engine writes them).
constexpr std::uint32_t waiter_merge_gap = 64;

/// Monitor passes whose answers may be in flight at once: each pass copies its answers out of
/// its own snapshot of the mirrors, so the next pass can go on without waiting for the copies.
constexpr std::uint32_t answer_slots = 4;

/// What every refusal of a warp's second request says: the cause and the cure.
constexpr const char* two_acquisitions_advice =
    "two acquisitions of one warp at once, refused (its lanes acquired apart: acquire is collective over the "
    "lanes active at the call, so reconverge them with __syncwarp() after a branch that only some of them took)";

}  // namespace

class ChannelState {
 public:
  explicit ChannelState(const ChannelConfig& config);
  ~ChannelState();
  ChannelState(const ChannelState&) = delete;
  ChannelState& operator=(const ChannelState&) = delete;

  void publish(std::uint32_t first_tag, std::uint32_t tag_count);
  void write(std::uint64_t offset, const void* data, std::size_t bytes);  // into buffer, wherever it lives
  [[nodiscard]] channel_producer producer(int device) const;
  void synchronize();
  void reset();
  [[nodiscard]] ChannelStats stats() const;

  ChannelConfig config;
  ChannelView view{};
  std::byte* buffer = nullptr;  // the producers' buffer: host_buffer_ or device_buffer_

 private:
  using Clock = std::chrono::steady_clock;

  struct Pending {
    Request request;
    std::uint32_t next_tag;  ///< the tags before it were seen set
  };
  struct Reader {
    std::uint32_t waiter;
    std::uint32_t seq;
    bool done;
  };
  struct InFlight {
    StagingLease lease;
    Reader readers[batch_max_requests];
  };

  [[nodiscard]] std::size_t answer_slot_bytes() const {
    return std::size_t{config.max_warps} * (sizeof(std::uint64_t) + sizeof(std::uint32_t));
  }
  void run();
  bool step();  // one pass of the monitor; true when it did something
  void recycle(bool& busy);
  void post_answers();
  void absorb_device_map(bool& busy);
  void poll_device_map(TagWords missing);
  [[nodiscard]] std::string take_device_error(ErrorKind& kind);
  void expect_host_publishing() const;
  void pin_monitor(int cpu);
  void open_monitor_warp(std::uint32_t queue_capacity);
  void clear_monitor_warp();

  stream_ptr stream_;
  pinned_ptr<std::byte> host_buffer_;    // buffer_device < 0
  device_ptr<std::byte> device_buffer_;  // buffer_device >= 0
  stream_ptr upload_stream_;             // host publishes into device_buffer_
  AvailabilityBytes dab_;  // none in direct mode: the warps poll the device map, host publishing is refused
  pinned_ptr<RequestSlot> slots_;
  device_ptr<RequestQueueCursors> device_cursors_;
  RequestQueueCursors host_cursors_{};
  RequestQueue<> queue_;
  device_ptr<std::byte> staging_;
  device_ptr<std::uint32_t> served_;
  device_ptr<std::uint64_t> offsets_;
  pinned_ptr<std::uint32_t> released_;
  pinned_ptr<std::uint32_t> served_mirror_;
  std::vector<std::uint32_t> taken_seq_;  // per warp: the number (Request::seq) of its last request taken
  pinned_ptr<std::uint64_t> offsets_mirror_;
  pinned_ptr<std::byte> answer_snapshots_;  // answer_slots x (offsets, then served words)
  event_ptr answer_copied_[answer_slots];
  std::uint32_t next_answer_slot_ = 0;
  device_ptr<std::uint64_t> direct_counts_;  // direct mode: ChannelView::direct_counts
  // Monitor-warp mode: the queue's slots in device memory (and the image they are reset from),
  // and the monitor warp's tables (WarpMonitorTables).
  device_ptr<RequestSlot> device_slots_;
  std::vector<RequestSlot> empty_slots_;
  device_ptr<std::uint32_t> waiting_heads_;
  device_ptr<WaitingNode> waiting_nodes_;
  device_ptr<std::uint32_t> taken_device_;
  device_ptr<std::uint64_t> seen_words_;
  device_ptr<std::uint32_t> word_waiters_;
  device_ptr<WaitingSpan> waiting_span_;
  device_ptr<std::uint64_t> monitor_counts_;
  pinned_ptr<ChannelErrorRecord> error_;
  device_ptr<std::uint32_t> error_claim_;
  std::vector<StagingTreeNode> tree_nodes_;
  StagingPageTree tree_;

  // device_producers: the map kernels publish into, and one copy of some of its words at a time.
  device_ptr<std::uint64_t> device_map_;
  pinned_ptr<std::uint64_t> map_snapshot_;
  stream_ptr poll_stream_;  // apart from stream_: a poll does not wait behind data copies
  event_ptr map_copied_;
  TagWords map_poll_span_;  // the words of the copy in flight; empty: none (guarded by mutex_, like the rest below)

  mutable std::mutex mutex_;  // held for each monitor pass, and by reset() and stats()
  std::vector<Pending> pending_;
  std::vector<std::size_t> ready_;  // indices into pending_, this pass
  std::vector<bool> taken_;          // per pending_ entry: served in this pass (kept for its capacity)
  std::vector<InFlight> in_flight_;
  std::vector<std::uint32_t> woken_;
  ChannelStats stats_;
  std::string failure_;  // guarded by mutex_
  ErrorKind failure_kind_ = ErrorKind::cuda;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ChannelState::ChannelState(const ChannelConfig& cfg)
    : config(cfg),
      dab_(cfg.direct || cfg.monitor_warp ? 0 : cfg.tag_count),
      queue_(nullptr, nullptr, 2),
      tree_nodes_(StagingPageTree::nodes_required(std::max(cfg.staging_pages, 1u))),
      tree_(tree_nodes_.data(), std::max(cfg.staging_pages, 1u)) {
  WARPVM_EXPECTS(cfg.tag_count >= 1, ErrorKind::invalid_config, "a channel needs at least one tag");
  WARPVM_EXPECTS(cfg.buffer_bytes >= 1, ErrorKind::invalid_config, "a channel needs a producer buffer");
  WARPVM_EXPECTS(cfg.staging_pages >= 1 && cfg.staging_pages < (1u << 31), ErrorKind::invalid_config,
                 "staging_pages must be 1 to 2^31-1");
  WARPVM_EXPECTS(cfg.staging_page_bytes >= staging_alignment && cfg.staging_page_bytes % staging_alignment == 0,
                 ErrorKind::invalid_config, "staging_page_bytes must be a positive multiple of 16");
  WARPVM_EXPECTS(cfg.max_warps >= 1 && cfg.max_warps <= (1u << 30), ErrorKind::invalid_config,
                 "max_warps must be 1 to 2^30");
  WARPVM_EXPECTS(cfg.watchdog_seconds > 0, ErrorKind::invalid_config, "watchdog_seconds must be positive");
  WARPVM_EXPECTS(cfg.monitor_cpu >= -1 && cfg.monitor_cpu < CPU_SETSIZE, ErrorKind::invalid_config,
                 "monitor_cpu must be -1 (the OS places the monitor thread) or a host CPU index");
  int devices = 0;
  WARPVM_CUDA_TRY(cudaGetDeviceCount(&devices));
  WARPVM_EXPECTS(cfg.buffer_device >= -1 && cfg.buffer_device < devices, ErrorKind::invalid_config,
                 "buffer_device must be -1 (pinned host memory) or a GPU index below " + std::to_string(devices));
  WARPVM_EXPECTS(!cfg.direct || (cfg.device_producers && cfg.buffer_device >= 0), ErrorKind::invalid_config,
                 "ChannelConfig::direct needs device_producers and the producers' buffer in GPU memory "
                 "(buffer_device >= 0): the consumers poll the device map and read the buffer in place");
  WARPVM_EXPECTS(!cfg.monitor_warp || (cfg.device_producers && cfg.buffer_device >= 0 && !cfg.direct),
                 ErrorKind::invalid_config,
                 "ChannelConfig::monitor_warp needs device_producers and the producers' buffer in GPU memory "
                 "(buffer_device >= 0), and not direct: the monitor warp polls the device map, the consumers read "
                 "the buffer in place");
  const DeviceGuard on_device_guard(cfg.device);

  stream_ = make_stream();
  if (cfg.buffer_device < 0) {
    // Mapped too: producer kernels write it through its device address.
    host_buffer_ = make_pinned_zeroed<std::byte>(cfg.buffer_bytes, cudaHostAllocPortable | cudaHostAllocMapped,
                                                 "the channel's producer buffer");
    buffer = host_buffer_.get();
  } else {
    {
      const DeviceGuard on_buffer_device(cfg.buffer_device);
      device_buffer_ = make_device_zeroed<std::byte>(cfg.buffer_bytes, "the channel's producer buffer");
    }
    buffer = device_buffer_.get();
    if (!cfg.direct && !cfg.monitor_warp) upload_stream_ = make_stream();  // else kernels publish, host publish is refused
    // The monitor's copies (direct mode: the consumers) read the buffer over NVLink, not through host memory.
    if (cfg.buffer_device != cfg.device) enable_peer_access(cfg.device, cfg.buffer_device, "channel (buffer_device)");
  }
  error_ = make_pinned_zeroed<ChannelErrorRecord>(1, cudaHostAllocMapped, "the channel's error record");
  error_claim_ = make_device_zeroed<std::uint32_t>(1, "the channel's error claim");
  if (cfg.device_producers) {
    device_map_ = make_device_zeroed<std::uint64_t>(AvailabilityBitmap<>::words_required(cfg.tag_count),
                                                    "the channel's device availability map");
    poll_stream_ = make_stream();
  }
  view.error = on_device(error_.get());
  view.error_claim = error_claim_.get();
  view.watchdog_ns = static_cast<std::uint64_t>(cfg.watchdog_seconds * 1e9);
  view.buffer_bytes = cfg.buffer_bytes;
  view.tag_count = cfg.tag_count;
  if (cfg.direct) {
    // The warps poll the map and read the buffer themselves: no queue, staging, waiter words or
    // monitor thread.
    direct_counts_ = make_device_zeroed<std::uint64_t>(direct_count_slots, "the channel's direct-mode counters");
    view.direct_map = device_map_.get();
    view.direct_buffer = device_buffer_.get();
    view.direct_counts = direct_counts_.get();
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());  // the zero fills are done before any kernel reads them
    return;
  }
  const std::uint32_t capacity = std::max(2u, std::bit_ceil(cfg.max_warps));  // a warp posts one request at a time
  if (cfg.monitor_warp) {
    open_monitor_warp(capacity);
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());  // the fills are done before any kernel reads them
    return;  // no monitor thread
  }
  slots_ = make_pinned_zeroed<RequestSlot>(capacity, cudaHostAllocMapped, "the channel's request queue");
  device_cursors_ = make_device_zeroed<RequestQueueCursors>(1, "the channel's queue cursors");
  queue_ = RequestQueue<>(&host_cursors_, slots_.get(), capacity);
  queue_.reset();  // turns in pinned memory; the device's tail starts at 0 (zeroed)
  const std::uint64_t staging_bytes = std::uint64_t{cfg.staging_pages} * cfg.staging_page_bytes;
  staging_ = make_device_zeroed<std::byte>(staging_bytes, "the channel's staging pages");
  served_ = make_device_zeroed<std::uint32_t>(cfg.max_warps, "the channel's waiter words");
  offsets_ = make_device_zeroed<std::uint64_t>(cfg.max_warps, "the channel's staging offsets");
  released_ = make_pinned_zeroed<std::uint32_t>(cfg.max_warps, cudaHostAllocMapped, "the channel's release words");
  served_mirror_ = make_pinned_zeroed<std::uint32_t>(cfg.max_warps, cudaHostAllocDefault, "waiter words (host copy)");
  taken_seq_.assign(cfg.max_warps, 0);
  offsets_mirror_ = make_pinned_zeroed<std::uint64_t>(cfg.max_warps, cudaHostAllocDefault, "offsets (host copy)");
  answer_snapshots_ = make_pinned_zeroed<std::byte>(std::size_t{answer_slots} * answer_slot_bytes(), cudaHostAllocDefault,
                                                    "the channel's answer snapshots");
  for (event_ptr& copied : answer_copied_) copied = make_event();
  if (cfg.device_producers) {
    map_snapshot_ = make_pinned_zeroed<std::uint64_t>(AvailabilityBitmap<>::words_required(cfg.tag_count),
                                                      cudaHostAllocDefault, "device map (host copy)");
    map_copied_ = make_event();
  }
  tree_.reset();

  view.slots = on_device(slots_.get());
  view.cursors = device_cursors_.get();
  view.served = served_.get();
  view.offsets = offsets_.get();
  view.released = on_device(released_.get());
  view.staging = staging_.get();
  view.staging_bytes = staging_bytes;
  view.queue_capacity = capacity;
  view.waiters = cfg.max_warps;
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());  // the zero fills are done before any kernel reads them
  thread_ = start_thread([this] { run(); }, "the channel's monitor thread");
  if (cfg.monitor_cpu >= 0) pin_monitor(cfg.monitor_cpu);
}

void ChannelState::open_monitor_warp(std::uint32_t queue_capacity) {
  const std::uint32_t words = AvailabilityBitmap<>::words_required(config.tag_count);
  device_slots_ = make_device_zeroed<RequestSlot>(queue_capacity, "the channel's request queue");
  empty_slots_.assign(queue_capacity, RequestSlot{});
  for (std::uint32_t i = 0; i < queue_capacity; ++i) empty_slots_[i].turn = i;  // RequestQueue::reset's turns
  device_cursors_ = make_device_zeroed<RequestQueueCursors>(1, "the channel's queue cursors");
  served_ = make_device_zeroed<std::uint32_t>(config.max_warps, "the channel's waiter words");
  waiting_heads_ = make_device_zeroed<std::uint32_t>(config.tag_count, "the monitor warp's waiting lists");
  waiting_nodes_ = make_device_zeroed<WaitingNode>(config.max_warps, "the monitor warp's waiting entries");
  taken_device_ = make_device_zeroed<std::uint32_t>(config.max_warps, "the monitor warp's taken counts");
  seen_words_ = make_device_zeroed<std::uint64_t>(words, "the monitor warp's copy of the map");
  word_waiters_ = make_device_zeroed<std::uint32_t>(words, "the monitor warp's waiters per map word");
  waiting_span_ = make_device_zeroed<WaitingSpan>(1, "the monitor warp's span");
  monitor_counts_ = make_device_zeroed<std::uint64_t>(monitor_count_slots, "the monitor warp's counters");
  // The zero fills ran on the legacy stream, which clear_monitor_warp's non-blocking stream does
  // not wait for: a late zero fill would undo its no_waiter heads and taken := served copy.
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  clear_monitor_warp();
  view.slots = device_slots_.get();
  view.cursors = device_cursors_.get();
  view.served = served_.get();
  view.queue_capacity = queue_capacity;
  view.waiters = config.max_warps;
  view.direct_buffer = device_buffer_.get();
  view.monitor_map = device_map_.get();
  view.monitor = WarpMonitorTables{waiting_heads_.get(), waiting_nodes_.get(), taken_device_.get(), seen_words_.get(),
                                   word_waiters_.get(), waiting_span_.get(), monitor_counts_.get()};
}

/// Monitor-warp mode, no kernel running: an empty queue, no waiting lists, nothing seen of the
/// map. Requests left in the queue are forgotten, as the host monitor's are in reset(): a warp's
/// next request counts on from its served ones (taken := served).
void ChannelState::clear_monitor_warp() {
  const std::uint32_t words = AvailabilityBitmap<>::words_required(config.tag_count);
  WARPVM_CUDA_TRY(cudaMemcpyAsync(device_slots_.get(), empty_slots_.data(), empty_slots_.size() * sizeof(RequestSlot),
                                  cudaMemcpyHostToDevice, stream_.get()));
  WARPVM_CUDA_TRY(cudaMemsetAsync(device_cursors_.get(), 0, sizeof(RequestQueueCursors), stream_.get()));
  WARPVM_CUDA_TRY(cudaMemsetAsync(waiting_heads_.get(), 0xff, std::size_t{config.tag_count} * sizeof(std::uint32_t),
                                  stream_.get()));  // no_waiter everywhere
  WARPVM_CUDA_TRY(cudaMemcpyAsync(taken_device_.get(), served_.get(), std::size_t{config.max_warps} * sizeof(std::uint32_t),
                                  cudaMemcpyDeviceToDevice, stream_.get()));
  WARPVM_CUDA_TRY(cudaMemsetAsync(seen_words_.get(), 0, std::size_t{words} * sizeof(std::uint64_t), stream_.get()));
  WARPVM_CUDA_TRY(cudaMemsetAsync(word_waiters_.get(), 0, std::size_t{words} * sizeof(std::uint32_t), stream_.get()));
  WARPVM_CUDA_TRY(cudaMemsetAsync(waiting_span_.get(), 0, sizeof(WaitingSpan), stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
}

void ChannelState::pin_monitor(int cpu) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(cpu, &cpus);
  const int failed = pthread_setaffinity_np(thread_.native_handle(), sizeof(cpus), &cpus);
  if (failed == 0) return;
  stop_.store(true);  // the constructor throws: the thread must not outlive it
  thread_.join();
  throw_error(ErrorKind::invalid_config,
              "monitor_cpu " + std::to_string(cpu) + ": the monitor thread cannot run there (" +
                  std::strerror(failed) + "; is the CPU online and in this process's CPU set?)",
              __FILE__, __LINE__);
}

ChannelState::~ChannelState() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();  // none in direct mode
  cudaDeviceSynchronize();  // kernels may still use what is freed next; nothing to do about an error
}

void ChannelState::expect_host_publishing() const {
  WARPVM_EXPECTS(!config.direct && !config.monitor_warp, ErrorKind::invalid_config,
                 std::string("channel::publish: a ") + (config.direct ? "direct-mode" : "monitor-warp") +
                     " channel's tags are published by kernels (channel::producer), into the device map");
}

void ChannelState::publish(std::uint32_t first_tag, std::uint32_t tag_count) {
  expect_host_publishing();
  WARPVM_EXPECTS(dab_.publish(first_tag, tag_count), ErrorKind::invalid_argument,
                 "channel::publish: tags [" + std::to_string(first_tag) + ", +" + std::to_string(tag_count) +
                     ") reach past the channel's " + std::to_string(config.tag_count) + " tags");
}

void ChannelState::write(std::uint64_t offset, const void* data, std::size_t bytes) {
  expect_host_publishing();  // before the copy: nothing changes in a refused call
  if (host_buffer_) {
    std::memcpy(buffer + offset, data, bytes);
    return;
  }
  const DeviceGuard on_device_guard(config.device);
  WARPVM_CUDA_TRY(cudaMemcpyAsync(buffer + offset, data, bytes, cudaMemcpyDefault, upload_stream_.get()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(upload_stream_.get()));  // in the buffer before the tags are set
}

channel_producer ChannelState::producer(int device) const {
  WARPVM_EXPECTS(device_map_ != nullptr, ErrorKind::invalid_config,
                 "channel::producer: the channel was made without ChannelConfig::device_producers");
  const int on = device < 0 ? config.device : device;
  int devices = 0;
  WARPVM_CUDA_TRY(cudaGetDeviceCount(&devices));
  WARPVM_EXPECTS(on < devices, ErrorKind::invalid_argument,
                 "channel::producer: device " + std::to_string(on) + " does not exist (" + std::to_string(devices) +
                     " visible)");
  if (on != config.device) {
    enable_peer_access(on, config.device, "channel::producer");
    int atomics = 0;
    WARPVM_CUDA_TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, on, config.device));
    WARPVM_EXPECTS(atomics != 0, ErrorKind::invalid_config,
                   "channel::producer: device " + std::to_string(on) + " has no native atomics on device " +
                       std::to_string(config.device) + "'s memory, where the availability map lives");
  }
  if (config.buffer_device >= 0 && config.buffer_device != on)
    enable_peer_access(on, config.buffer_device, "channel::producer");
  std::byte* buffer_there = buffer;
  if (host_buffer_) {
    const DeviceGuard on_producer_device(on);
    buffer_there = on_device(host_buffer_.get());
  }
  return channel_producer(buffer_there, config.buffer_bytes, device_map_.get(), config.tag_count);
}

void ChannelState::run() {
  if (cudaSetDevice(config.device) != cudaSuccess) {
    const std::lock_guard lock(mutex_);
    failure_ = "cudaSetDevice failed in the channel monitor";
    return;
  }
  auto idle_since = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    bool busy = false;
    {
      const std::lock_guard lock(mutex_);
      if (failure_.empty()) {
        try {
          busy = step();
        } catch (const Error& e) {
          failure_ = e.what();
          failure_kind_ = e.kind();
        }
      }
    }
    if (busy) {
      idle_since = Clock::now();
    } else if (Clock::now() - idle_since > std::chrono::milliseconds(2)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // gentler after a quiet spell
    } else {
      std::this_thread::yield();
    }
  }
}

void ChannelState::recycle(bool& busy) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const std::uint32_t readers = it->lease.readers_left;
    for (std::uint32_t i = 0, seen = 0; seen < readers && i < batch_max_requests; ++i) {
      Reader& reader = it->readers[i];
      if (reader.done) continue;
      ++seen;
      // Acquire: the warp's reads of its data happen before the pages are handed out again.
      const std::uint32_t released = std::atomic_ref<std::uint32_t>(released_.get()[reader.waiter]).load(std::memory_order_acquire);
      if (channel_seq_reached(released, reader.seq)) {
        reader.done = true;
        lease_finish_reading(it->lease);
      }
    }
    if (lease_drained(it->lease)) {
      WARPVM_EXPECTS(tree_.release(it->lease.first_page, it->lease.pages), ErrorKind::cuda,
                     "channel monitor: a staging run was freed twice");
      it = in_flight_.erase(it);
      busy = true;
    } else {
      ++it;
    }
  }
}

bool ChannelState::step() {
  const auto pass_started = Clock::now();
  bool busy = false;
  for (Request r{}; queue_.try_take(r);) {
    WARPVM_EXPECTS(r.waiter < config.max_warps && r.tag_count <= config.tag_count &&
                       r.first_tag <= config.tag_count - r.tag_count,
                   ErrorKind::invalid_argument, "channel monitor: a malformed request");
    std::uint32_t& taken = taken_seq_[r.waiter];
    const std::uint32_t served = served_mirror_.get()[r.waiter];
    if (!request_follows(r.seq, taken, served))
      throw_error(ErrorKind::invalid_argument,
                  "channel: warp " + std::to_string(r.waiter) + " posted its request number " + std::to_string(r.seq) +
                      " while the monitor had taken " + std::to_string(taken) + " and served " +
                      std::to_string(served) + " of its requests: " + two_acquisitions_advice,
                  __FILE__, __LINE__);
    taken = r.seq;
    pending_.push_back({r, r.first_tag});
    ++stats_.requests;
    busy = true;
  }
  recycle(busy);
  if (pending_.empty()) return busy;

  // Ready requests into batches of up to 16 on one contiguous staging run each, in the order of
  // their source offsets: neighbours' adjacent or overlapping ranges then share one copy
  // (Batch::try_add). Every ready request is served in this pass unless staging runs short.
  if (device_map_) absorb_device_map(busy);
  woken_.clear();
  ready_.clear();
  TagWords missing;  // the device map words holding the tags pending requests still wait on
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    const std::uint32_t end = p.request.first_tag + p.request.tag_count;
    p.next_tag = dab_.first_missing(p.next_tag, end - p.next_tag);
    if (p.next_tag == end) ready_.push_back(i);
    else missing.add(p.next_tag, end - p.next_tag);
  }
  std::stable_sort(ready_.begin(), ready_.end(), [this](std::size_t a, std::size_t b) {
    return pending_[a].request.source_offset < pending_[b].request.source_offset;
  });
  const std::uint32_t page_bytes = config.staging_page_bytes;
  if (device_map_) poll_device_map(missing);
  // One copy per run of requests contiguous or overlapping in the buffer and placed at the same
  // displacement in staging (Batch::try_add lays overlapping sources out so); a run may span
  // batches whose staging runs the tree handed out back to back. All are issued in this pass.
  std::uint64_t run_source = 0, run_target = 0, run_bytes = 0;
  auto flush_run = [&] {
    if (run_bytes == 0) return;
    const auto call_started = Clock::now();
    WARPVM_CUDA_TRY(cudaMemcpyAsync(staging_.get() + run_target, buffer + run_source, run_bytes, cudaMemcpyDefault,
                                    stream_.get()));
    stats_.copy_call_seconds += std::chrono::duration<double>(Clock::now() - call_started).count();
    ++stats_.copies;
    stats_.bytes += run_bytes;
    run_bytes = 0;
  };
  // Batches take ready_ in order: ready_[0, next) are the requests served in this pass.
  std::size_t next = 0;
  while (next < ready_.size()) {
    Batch batch;
    const std::uint64_t max_bytes = std::uint64_t{tree_.largest_free_run()} * page_bytes;
    for (; next < ready_.size(); ++next)
      if (!batch.try_add(pending_[ready_[next]].request, max_bytes)) break;  // full, or staging is short
    if (batch.count == 0) break;  // a ready request that no free run can hold yet
    const std::uint32_t first_page = tree_.allocate(batch.pages(page_bytes));
    WARPVM_EXPECTS(first_page != StagingPageTree::no_run, ErrorKind::cuda,
                   "channel monitor: no staging run although the batch fits the largest");
    InFlight flight{};
    lease_open(flight.lease, first_page, batch.pages(page_bytes), batch.count);
    const std::uint64_t base = std::uint64_t{first_page} * page_bytes;

    // The data (see the copy runs above).
    for (std::uint32_t i = 0; i < batch.count; ++i) {
      const Request& r = batch.requests[i];
      const std::uint64_t target = base + batch.offsets[i];
      if (run_bytes != 0 && r.source_offset >= run_source && r.source_offset <= run_source + run_bytes &&
          target - run_target == r.source_offset - run_source) {
        run_bytes = std::max(run_bytes, r.source_offset + r.bytes - run_source);
      } else {
        flush_run();
        run_source = r.source_offset;
        run_target = target;
        run_bytes = r.bytes;
      }
      const std::uint32_t w = r.waiter;
      served_mirror_.get()[w] += 1;
      offsets_mirror_.get()[w] = target;
      flight.readers[i] = Reader{w, served_mirror_.get()[w], false};
      woken_.push_back(w);
    }
    in_flight_.push_back(flight);
    ++stats_.batches;
    stats_.largest_batch = std::max(stats_.largest_batch, batch.count);
  }
  flush_run();
  if (woken_.empty()) return busy;

  taken_.assign(pending_.size(), false);
  for (std::size_t k = 0; k < next; ++k) taken_[ready_[k]] = true;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (!taken_[i]) pending_[kept++] = pending_[i];
  pending_.resize(kept);
  post_answers();
  ++stats_.passes;
  stats_.serving_seconds += std::chrono::duration<double>(Clock::now() - pass_started).count();
  return true;
}

void ChannelState::absorb_device_map(bool& busy) {
  if (map_poll_span_.empty()) return;
  const cudaError_t copied = cudaEventQuery(map_copied_.get());
  if (copied == cudaErrorNotReady) return;
  WARPVM_CUDA_TRY(copied);
  const TagWords span = std::exchange(map_poll_span_, TagWords{});
  // The copy is complete, so the snapshot holds words the copy engine read after the kernels'
  // system-scope release ORs that set them: their data is written (docs/channels.md).
  const std::uint32_t learnt = dab_.merge(map_snapshot_.get(), span);
  stats_.map_tags += learnt;
  if (learnt != 0) busy = true;
}

void ChannelState::poll_device_map(TagWords missing) {
  if (!map_poll_span_.empty() || missing.empty()) return;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(map_snapshot_.get() + missing.first, device_map_.get() + missing.first,
                                  std::size_t{missing.count()} * sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                                  poll_stream_.get()));
  WARPVM_CUDA_TRY(cudaEventRecord(map_copied_.get(), poll_stream_.get()));
  map_poll_span_ = missing;
  ++stats_.map_polls;
}

void ChannelState::post_answers() {
  std::sort(woken_.begin(), woken_.end());
  struct Range {
    std::uint32_t first, end;
  };
  std::vector<Range> ranges;
  for (const std::uint32_t w : woken_) {
    if (!ranges.empty() && w < ranges.back().end + waiter_merge_gap) ranges.back().end = std::max(ranges.back().end, w + 1);
    else ranges.push_back({w, w + 1});
  }
  // The ranges are copied out of this pass's own snapshot of the mirrors, which later passes
  // do not touch until the snapshot's copies are done (the slot's event): a copy can never carry
  // a mirror value newer than the data it announces. Waiting here is rare (answer_stalls).
  const auto calls_started = Clock::now();
  const std::uint32_t slot = next_answer_slot_;
  next_answer_slot_ = (next_answer_slot_ + 1) % answer_slots;
  if (const cudaError_t copied = cudaEventQuery(answer_copied_[slot].get()); copied == cudaErrorNotReady) {
    ++stats_.answer_stalls;
    const auto stall_started = Clock::now();
    WARPVM_CUDA_TRY(cudaEventSynchronize(answer_copied_[slot].get()));
    stats_.answer_stall_seconds += std::chrono::duration<double>(Clock::now() - stall_started).count();
  } else {
    WARPVM_CUDA_TRY(copied);
  }
  std::byte* snapshot = answer_snapshots_.get() + std::size_t{slot} * answer_slot_bytes();
  auto* offsets = reinterpret_cast<std::uint64_t*>(snapshot);
  auto* served = reinterpret_cast<std::uint32_t*>(snapshot + std::size_t{config.max_warps} * sizeof(std::uint64_t));
  for (const Range& r : ranges) {
    const std::size_t n = r.end - r.first;
    std::memcpy(offsets + r.first, offsets_mirror_.get() + r.first, n * sizeof(std::uint64_t));
    std::memcpy(served + r.first, served_mirror_.get() + r.first, n * sizeof(std::uint32_t));
  }
  // Offsets first, then the waiter words: stream order puts every answer (and, before it, every
  // batch's data) in device memory before any warp can see its request served.
  for (const Range& r : ranges)
    WARPVM_CUDA_TRY(cudaMemcpyAsync(offsets_.get() + r.first, offsets + r.first,
                                    std::size_t{r.end - r.first} * sizeof(std::uint64_t), cudaMemcpyHostToDevice,
                                    stream_.get()));
  for (const Range& r : ranges)
    WARPVM_CUDA_TRY(cudaMemcpyAsync(served_.get() + r.first, served + r.first,
                                    std::size_t{r.end - r.first} * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                                    stream_.get()));
  WARPVM_CUDA_TRY(cudaEventRecord(answer_copied_[slot].get(), stream_.get()));
  stats_.copy_call_seconds += std::chrono::duration<double>(Clock::now() - calls_started).count();
}

ChannelStats ChannelState::stats() const {
  ChannelStats stats;
  {
    const std::lock_guard lock(mutex_);
    stats = stats_;
  }
  // Counters kept on the device: a snapshot on the channel's own non-blocking stream, so even
  // while consumers run.
  auto copy_counts = [&](const std::uint64_t* from, std::uint64_t* into, std::size_t n) {
    const DeviceGuard on_device_guard(config.device);
    WARPVM_CUDA_TRY(cudaMemcpyAsync(into, from, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_.get()));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
  };
  if (monitor_counts_) {
    std::uint64_t counts[monitor_count_slots] = {};
    copy_counts(monitor_counts_.get(), counts, monitor_count_slots);
    stats.requests = counts[monitor_count_requests];
    stats.passes = counts[monitor_count_wakes];
    stats.map_polls = counts[monitor_count_polls];
    stats.map_tags = counts[monitor_count_tags];
  }
  if (direct_counts_) {
    std::uint64_t counts[direct_count_slots] = {};
    copy_counts(direct_counts_.get(), counts, direct_count_slots);
    stats.direct_acquires = counts[direct_count_acquires];
    stats.direct_parked = counts[direct_count_parked];
  }
  return stats;
}

void ChannelState::synchronize() {
  const DeviceGuard on_device_guard(config.device);
  const cudaError_t status = cudaDeviceSynchronize();
  ErrorKind device_kind = ErrorKind::cuda;
  const std::string device_failure = take_device_error(device_kind);
  std::string failure;
  ErrorKind failure_kind = ErrorKind::cuda;
  {
    const std::lock_guard lock(mutex_);
    failure.swap(failure_);
    failure_kind = failure_kind_;
  }
  // The cause first. A device failure ends the kernel, and the monitor's CUDA calls fail after
  // it; but a monitor that stopped (a refused request) leaves warps waiting until their watchdog
  // fires, so a device timeout is the monitor's failure's consequence.
  const bool monitor_first =
      !failure.empty() && (device_failure.empty() || device_kind == ErrorKind::no_progress);
  if (monitor_first)
    throw_error(failure_kind,
                "the channel monitor failed: " + failure +
                    (device_failure.empty() ? std::string() : "; then, on the device: " + device_failure),
                __FILE__, __LINE__);
  if (!device_failure.empty())
    throw_error(device_kind,
                device_failure + (failure.empty() ? std::string() : "; then the channel monitor failed: " + failure),
                __FILE__, __LINE__);
  WARPVM_CUDA_TRY(status);
}

/// The first device-side failure on record, as a message (empty: none), and clears the record.
std::string ChannelState::take_device_error(ErrorKind& kind) {
  volatile ChannelErrorRecord* record = error_.get();
  if (record->state == 0) return {};
  const auto fault = static_cast<ChannelFault>(record->fault);
  const std::uint32_t warp = record->warp;
  const std::uint32_t first_tag = record->first_tag;
  const std::uint64_t value = record->value;
  const std::uint64_t source_offset = record->source_offset;
  record->state = 0;
  // Waited for: a kernel launched next on another stream must not see the old claim (its own
  // failure would be dropped). Best effort: the context may be gone.
  cudaMemset(error_claim_.get(), 0, sizeof(std::uint32_t));
  cudaStreamSynchronize(cudaStreamLegacy);
  std::ostringstream what;
  kind = ErrorKind::invalid_argument;
  switch (fault) {
    case ChannelFault::wait_timeout:
      kind = ErrorKind::no_progress;
      what << "channel: for " << config.watchdog_seconds << " s warp " << warp << " waited for tags [" << first_tag
           << ", " << first_tag + value << "), never all published";
      if (config.monitor_warp) what << " (or no monitor warp served the channel: channel_handle::monitor)";
      else if (!config.direct) what << " (or the monitor stopped)";  // direct mode has no monitor
      break;
    case ChannelFault::post_timeout:
      kind = ErrorKind::no_progress;
      what << "channel: for " << config.watchdog_seconds << " s warp " << warp
           << " found the request queue full (is the monitor running?)";
      break;
    case ChannelFault::bad_warp:
      what << "channel: warp " << value << " acquired, but the channel serves warps below max_warps = "
           << config.max_warps;
      break;
    case ChannelFault::bad_request:
      what << "channel: warp " << warp << " asked for tags from " << first_tag << ", " << value << " bytes at offset "
           << source_offset << ": out of range (" << config.tag_count << " tags, buffer " << config.buffer_bytes
           << " B, ";
      if (!config.direct && !config.monitor_warp) what << "staging " << view.staging_bytes << " B, ";
      what << "at least 1 byte)";
      break;
    case ChannelFault::not_uniform:
      what << "channel: the lanes of warp " << warp << " passed different arguments to acquire (it is warp-uniform)";
      break;
    case ChannelFault::served_ahead:
      what << "channel: warp " << warp << " woke to served count " << value
           << ", past the request it posted (tag " << first_tag << ", offset " << source_offset
           << "): " << two_acquisitions_advice;
      break;
    case ChannelFault::split_request:
      what << "channel: the monitor warp took request number " << value << " of warp " << warp << " (tag " << first_tag
           << ", offset " << source_offset
           << ") while another of its requests was pending: " << two_acquisitions_advice;
      break;
    case ChannelFault::not_monitor_warp:
      what << "channel: warp " << warp
           << " called channel_handle::monitor on a channel made without ChannelConfig::monitor_warp";
      break;
    default:
      what << "channel: unknown device failure " << static_cast<std::uint32_t>(fault);
  }
  return what.str();
}

void ChannelState::reset() {
  synchronize();
  const DeviceGuard on_device_guard(config.device);
  const std::lock_guard lock(mutex_);
  if (config.monitor_warp) clear_monitor_warp();
  if (!config.direct && !config.monitor_warp)  // direct mode has no queue, the monitor warp's is cleared above
    for (Request r{}; queue_.try_take(r);) {
    }
  // Forgotten requests are never served: their warps' next requests count on from the served ones.
  for (const Pending& p : pending_) taken_seq_[p.request.waiter] = served_mirror_.get()[p.request.waiter];
  pending_.clear();
  for (const InFlight& f : in_flight_) (void)tree_.release(f.lease.first_page, f.lease.pages);
  in_flight_.clear();
  dab_.clear();
  if (device_map_) {
    // A poll issued since synchronize() is dropped: its words may predate the clearing.
    WARPVM_CUDA_TRY(cudaStreamSynchronize(poll_stream_.get()));
    WARPVM_CUDA_TRY(cudaMemsetAsync(device_map_.get(), 0,
                                    std::size_t{AvailabilityBitmap<>::words_required(config.tag_count)} *
                                        sizeof(std::uint64_t),
                                    poll_stream_.get()));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(poll_stream_.get()));
    map_poll_span_ = {};
  }
}

}  // namespace warpvm::detail

namespace warpvm {

channel::channel(const ChannelConfig& config) : state_(std::make_unique<detail::ChannelState>(config)) {}
channel::~channel() = default;
channel::channel(channel&&) noexcept = default;
channel& channel::operator=(channel&&) noexcept = default;

channel_handle channel::device() const { return channel_handle(state_->view); }
std::span<std::byte> channel::buffer() const { return {state_->buffer, state_->config.buffer_bytes}; }
channel_producer channel::producer(int device) const { return state_->producer(device); }

void channel::publish(std::uint32_t first_tag, std::uint32_t tag_count) { state_->publish(first_tag, tag_count); }

void channel::publish(std::uint32_t first_tag, std::uint32_t tag_count, std::uint64_t offset, const void* data,
                      std::size_t bytes) {
  WARPVM_EXPECTS(offset <= state_->config.buffer_bytes && bytes <= state_->config.buffer_bytes - offset,
                 ErrorKind::invalid_argument,
                 "channel::publish: " + std::to_string(bytes) + " B at offset " + std::to_string(offset) +
                     " reach past the buffer of " + std::to_string(state_->config.buffer_bytes) + " B");
  state_->write(offset, data, bytes);
  state_->publish(first_tag, tag_count);
}

void channel::synchronize() { state_->synchronize(); }
void channel::reset() { state_->reset(); }
ChannelStats channel::stats() const { return state_->stats(); }
const ChannelConfig& channel::config() const { return state_->config; }

std::size_t channel::monitor_scratch_bytes() const {
  return static_cast<std::size_t>(detail::monitor_scratch_bytes(state_->config.tag_count, state_->config.max_warps));
}

}  // namespace warpvm
