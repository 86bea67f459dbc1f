// warpvm-alloc-bench's access workloads (issue #4; the paper's Sections VII-E to VII-G). Each
// thread allocates a range, the ranges are written whole with a pattern (pattern_word), then
// each thread reads its own range at random (access_word) and sums the words. Only the read
// kernel is timed, every run starting with nothing on the GPU (warpvm: Runtime::drop_cached;
// managed: prefetched back to the host), and every thread's sum is checked against the host's.
//
//   random_access     1K threads, ranges of 0.5 KB to 2 MB (powers of 2), 100 reads each
//   large_ranges      128 threads over 16 MB each, 100 reads
//   oversubscription  120 MB per thread, 420 reads, whole warps of threads whose ranges total at
//                     least 2.5x the cache (warpvm modes; the uvm preset only in a build with
//                     -DWARPVM_HOST_BATCHED_EVICTION=ON, the preset's evicting path)
//
// Modes. The heap runs without the fast path, so that the layout decides at every size:
//   warpvm_aligned / warpvm_contiguous          warpvm::Heap under warpvm's default config
//   warpvm_uvm_aligned / warpvm_uvm_contiguous  warpvm::Heap under the `uvm` preset
//   managed_aligned / managed_contiguous        real UVM, in core: the heap's placement and
//                                               layouts (place_warp_regions, heap_ptr::offset_of)
//                                               over one cudaMallocManaged buffer
// In-core points give the cache the whole heap. faults and bytes_moved: warpvm's counters
// (pages loaded and bytes both ways; the preset adds its batches: faults_taken, unique_faults,
// pages_prefetched), CUPTI's for managed (GPU fault records, bytes both ways; null, with
// uvm_counters_unavailable, where CUPTI cannot count). Each record adds threads, range_bytes,
// accesses, touched_bytes (the distinct 4 KB pages read, also useful_bytes) and
// prefetch_utilization (touched_bytes / bytes_moved), the seed of the pattern and reads, and
// prefetch_first (--lane-order: the aligned layout's lane order, the paper's pattern order) and
// per_warp_offsets (--access-offsets per_warp: every lane of a warp reads the same offset of its
// own range at each step, instead of drawing its own).

#include "access_bench.hpp"
#include "warpvm/workloads/alloc/access_workloads.hpp"

#include "uvm_counters.hpp"
#include "warpvm/heap.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

using workloads::pattern_word;
using workloads::access_stream;
using workloads::access_word;
using workloads::AccessOffsets;
using workloads::place_warp_regions;
using workloads::WarpRegions;
using workloads::expected_sums;
using workloads::touched_page_bytes;
using workloads::heap_bytes_for;

/// Managed points leave this much of the GPU's free memory spare: real UVM past the GPU's
/// memory can hang it, so these modes stay in core.
constexpr std::uint64_t managed_headroom_bytes = 4ull << 30;
/// oversubscription's ranges total at least this many times the cache (the issue's target).
constexpr double oversubscription_ratio = 2.5;

struct AccessPoint {
  std::string workload;
  std::uint64_t threads, range_bytes, accesses;
  std::uint64_t cache_bytes = 0;  ///< 0: in core, the cache holds the whole heap
  [[nodiscard]] std::uint64_t words() const { return range_bytes / 4; }
  [[nodiscard]] std::uint64_t total_bytes() const { return threads * range_bytes; }
};

/// A heap allocation's words: through warpvm's page cache (HeapMemory, access_bench.hpp), or in
/// the managed backend, the same translation (heap_ptr::offset_of) into a managed buffer.
struct ManagedWords {
  std::byte* base;
  __device__ std::uint32_t* at(const heap_ptr& p, std::uint64_t word) const {
    return reinterpret_cast<std::uint32_t*>(base + p.offset_of(word * 4));
  }
  __device__ std::uint32_t load(const heap_ptr& p, std::uint64_t word) const { return *at(p, word); }
  __device__ void store(const heap_ptr& p, std::uint64_t word, std::uint32_t value) const { *at(p, word) = value; }
};

__global__ void allocate_ranges(device_heap heap, heap_ptr* ptrs, std::uint64_t threads, std::uint64_t bytes) {
  const std::uint64_t t = thread_index();
  if (t < threads) ptrs[t] = heap.malloc(bytes);
}

__global__ void free_ranges(device_heap heap, const heap_ptr* ptrs, std::uint64_t threads) {
  const std::uint64_t t = thread_index();
  if (t < threads) heap.free(ptrs[t]);
}

/// Every word of every range, word i of all of them in one grid-stride pass (thread i / words,
/// word i % words), so that a few threads' large ranges are still written by the whole GPU.
template <class Words>
__global__ void write_ranges(Words memory, const heap_ptr* ptrs, std::uint64_t threads, std::uint64_t words,
                             std::uint64_t seed) {
  const std::uint64_t total = threads * words;
  for (std::uint64_t i = thread_index(); i < total; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t t = i / words, w = i % words;
    const heap_ptr p = ptrs[t];
    if (p) memory.store(p, w, pattern_word(seed, t, w));
  }
}

/// The timed kernel: thread t reads `accesses` random words of its own range and keeps the sum.
template <class Words>
__global__ void read_ranges(Words memory, const heap_ptr* ptrs, std::uint64_t threads, std::uint64_t words,
                            std::uint64_t accesses, std::uint64_t seed, AccessOffsets offsets,
                            unsigned long long* sums) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  const heap_ptr p = ptrs[t];
  const std::uint64_t stream = access_stream(t, offsets);
  unsigned long long sum = 0;
  for (std::uint64_t a = 0; p && a < accesses; ++a) sum += memory.load(p, access_word(seed, stream, a, words));
  sums[t] = sum;
}

/// write_ranges' grid for `words` words: up to 8 blocks per SM, at most `max_threads` threads.
dim3 fill_grid(std::uint64_t words, std::uint64_t max_threads, int sms) {
  const std::uint64_t blocks = std::min<std::uint64_t>(
      {(words + block_threads - 1) / block_threads, max_threads / block_threads, std::uint64_t(sms) * 8});
  return dim3(static_cast<unsigned>(std::max<std::uint64_t>(blocks, 1)));
}

/// Reads `count` elements of device memory back.
template <class T>
std::vector<T> to_host(const T* device, std::uint64_t count) {
  std::vector<T> host(count);
  check(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  return host;
}

class AccessRunner {
 public:
  AccessRunner(const Options& options, Recorder& recorder, detail::LaneOrder order, AccessOffsets offsets,
               bool managed)
      : options_(options),
        recorder_(recorder),
        order_(order),
        offsets_(offsets),
        seed_(std::random_device{}() % recorded_seed_limit) {
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0), "SM count");
    if (!managed) return;
    // CUPTI counts UVM traffic only for managed memory allocated after its counters were first
    // enabled (warpvm-bench found this on the H200), so arm them before any Managed exists.
    try {
      UvmCounters().stop();
      counters_ = true;
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "warpvm-alloc-bench: no UVM counters (%s); managed faults and bytes are null\n", e.what());
    }
  }

  /// One heap per mode and point set, sized for the largest point; true when all verified.
  bool heap_points(const std::string& mode, const std::vector<AccessPoint>& points, std::uint64_t capacity,
                   HeapLayout layout, bool uvm_preset) {
    if (points.empty()) return true;
    const std::uint64_t cache = points.front().cache_bytes;
    Config config = uvm_preset ? uvm_preset_config({capacity}, 1.0) : Config{.cache_bytes = capacity};
    if (cache != 0) config.cache_bytes = cache;
    config.max_pages_held_per_thread = 2;
    Runtime rt(config);
    Heap heap(rt, HeapOptions{.capacity_bytes = capacity, .layout = layout, .lane_order = order_, .fast_path = false});
    bool all = true;
    for (const AccessPoint& pt : points) all = write(measure_heap(rt, heap, pt, uvm_preset), mode, pt) && all;
    return all;
  }

  bool managed_points(const std::string& mode, const std::vector<AccessPoint>& points, std::uint64_t capacity,
                      HeapLayout layout) {
    bool all = true;
    for (const AccessPoint& pt : points) all = write(measure_managed(pt, capacity, layout), mode, pt) && all;
    return all;
  }

 private:
  Record measure_heap(Runtime& rt, Heap& heap, const AccessPoint& pt, bool uvm_preset) {
    DeviceBuffer<heap_ptr> ptrs(pt.threads);
    DeviceBuffer<unsigned long long> sums(pt.threads);
    heap.reset_stats();
    rt.launch(allocate_ranges, grid_for(pt.threads), dim3(block_threads), 0, heap.device(), ptrs.data, pt.threads,
              pt.range_bytes);
    rt.synchronize();
    const std::vector<heap_ptr> got = to_host(ptrs.data, pt.threads);
    const HeapMemory words{heap.device()};
    rt.launch(write_ranges<HeapMemory>, fill_grid(pt.threads * pt.words(), rt.max_resident_threads(), sms_),
              dim3(block_threads), 0, words, ptrs.data, pt.threads, pt.words(), seed_);
    rt.synchronize();
    const auto drop = [&] { rt.drop_cached(); };
    drop();  // the ranges written back: every read comes from host memory
    // The read kernel is launched directly, so that the timed span holds no host-side checks.
    rt.check_launch(reinterpret_cast<const void*>(read_ranges<HeapMemory>), grid_for(pt.threads),
                    dim3(block_threads), 0);
    const auto read = [&] {
      read_ranges<HeapMemory><<<grid_for(pt.threads), block_threads, 0, rt.stream()>>>(
          words, ptrs.data, pt.threads, pt.words(), pt.accesses, seed_, offsets_, sums.data);
      check(cudaGetLastError(), "read_ranges launch");
    };
    rt.reset_stats();
    Record r;
    r.seconds = time_runs(rt.stream(), options_.repeats, drop, read);
    rt.synchronize();  // a kernel that trapped raises its recorded Error
    add_paging_stats(r, rt, options_.repeats + 1);
    r.policy = uvm_preset ? uvm_policy(rt.config()) : "default";
    if (uvm_preset) {
      std::ofstream no_trace;
      add_batch_summary(r, rt, drop, [&] { read(); rt.synchronize(); }, no_trace);
    }
    const std::uint64_t mismatches = count_mismatches(sums.data, pt);
    rt.launch(free_ranges, grid_for(pt.threads), dim3(block_threads), 0, heap.device(), ptrs.data, pt.threads);
    const HeapStats stats = heap.stats();
    r.verified = mismatches == 0 && stats.failed_allocations == 0 && stats.reserved_bytes == 0;
    r.extra["failed"] = static_cast<double>(stats.failed_allocations);
    r.extra["heap_bytes"] = static_cast<double>(heap.capacity_bytes());
    r.cache_fraction = std::min(1.0, static_cast<double>(rt.cache_bytes()) / static_cast<double>(pt.total_bytes()));
    describe(r, pt, got, mismatches);
    return r;
  }

  Record measure_managed(const AccessPoint& pt, std::uint64_t capacity, HeapLayout layout) {
    const WarpRegions placed = place_warp_regions(capacity, layout, order_, pt.threads, pt.range_bytes);
    Managed buffer(placed.extent_bytes);
    DeviceBuffer<heap_ptr> ptrs(pt.threads);
    DeviceBuffer<unsigned long long> sums(pt.threads);
    check(cudaMemcpy(ptrs.data, placed.ptrs.data(), pt.threads * sizeof(heap_ptr), cudaMemcpyHostToDevice),
          "cudaMemcpy the placement");
    const ManagedWords words{buffer.as<std::byte>()};
    const dim3 fill = fill_grid(pt.threads * pt.words(), ~std::uint64_t{0}, sms_);
    write_ranges<ManagedWords><<<fill, block_threads>>>(words, ptrs.data, pt.threads, pt.words(), seed_);
    check(cudaGetLastError(), "write_ranges launch");
    check(cudaDeviceSynchronize(), "write_ranges");
    const auto back_to_host = [&] { buffer.to_host(); };
    const auto read = [&] {
      read_ranges<ManagedWords><<<grid_for(pt.threads), block_threads>>>(words, ptrs.data, pt.threads, pt.words(),
                                                                         pt.accesses, seed_, offsets_, sums.data);
      check(cudaGetLastError(), "read_ranges launch");
    };
    Record r;
    r.seconds = time_runs(nullptr, options_.repeats, back_to_host, read);
    check(cudaDeviceSynchronize(), "read_ranges");
    r.policy = "managed";
    r.cache_fraction = 1;
    if (counters_) {
      add_uvm_traffic(r, back_to_host, read, options_.uvm_counted_runs);
    } else {
      r.extra["uvm_counters_unavailable"] = 1;
    }
    const std::uint64_t mismatches = count_mismatches(sums.data, pt);
    const auto failed = static_cast<std::uint64_t>(
        std::count_if(placed.ptrs.begin(), placed.ptrs.end(), [](const heap_ptr& p) { return !p; }));
    r.verified = mismatches == 0 && failed == 0;
    r.extra["failed"] = static_cast<double>(failed);
    r.extra["managed_bytes"] = static_cast<double>(placed.extent_bytes);
    describe(r, pt, placed.ptrs, mismatches);
    return r;
  }

  /// Threads whose sum is not the host's.
  std::uint64_t count_mismatches(const unsigned long long* sums, const AccessPoint& pt) const {
    const std::vector<unsigned long long> got = to_host(sums, pt.threads);
    const std::vector<std::uint64_t> want = expected_sums(seed_, pt.threads, pt.words(), pt.accesses, offsets_);
    std::uint64_t mismatches = 0;
    for (std::uint64_t t = 0; t < pt.threads; ++t) mismatches += got[t] != want[t];
    return mismatches;
  }

  void describe(Record& r, const AccessPoint& pt, const std::vector<heap_ptr>& ptrs, std::uint64_t mismatches) const {
    const std::uint64_t touched = touched_page_bytes(ptrs, seed_, pt.words(), pt.accesses, offsets_);
    r.workload = pt.workload;
    r.dataset_bytes = pt.total_bytes();
    r.useful_bytes = touched;
    r.extra["threads"] = static_cast<double>(pt.threads);
    r.extra["range_bytes"] = static_cast<double>(pt.range_bytes);
    r.extra["accesses"] = static_cast<double>(pt.accesses);
    r.extra["touched_bytes"] = static_cast<double>(touched);
    r.extra["mismatches"] = static_cast<double>(mismatches);
    r.extra["seed"] = static_cast<double>(seed_);
    r.extra["prefetch_first"] = order_ == detail::LaneOrder::prefetch_first ? 1 : 0;
    r.extra["per_warp_offsets"] = offsets_ == AccessOffsets::per_warp ? 1 : 0;
    if (r.bytes_moved > 0) r.extra["prefetch_utilization"] = static_cast<double>(touched) / r.bytes_moved;
  }

  bool write(Record r, const std::string& mode, const AccessPoint& pt) {
    r.mode = mode;
    if (pt.cache_bytes != 0) r.extra["total_over_cache"] = static_cast<double>(pt.total_bytes()) / pt.cache_bytes;
    recorder_.write(r);
    return r.verified;
  }

  const Options& options_;
  Recorder& recorder_;
  detail::LaneOrder order_;
  AccessOffsets offsets_;
  /// Records print 9 significant digits: a seed below 10^9 is recorded exactly (a 32-bit one
  /// came out rounded, naming other draws than the run's).
  static constexpr std::uint64_t recorded_seed_limit = 1'000'000'000;
  std::uint64_t seed_;  ///< fresh each run of the benchmark, recorded
  int sms_ = 0;
  bool counters_ = false;
};

/// The fewest whole warps whose ranges of `range` bytes total at least 2.5x `cache`.
std::uint64_t oversubscribing_threads(std::uint64_t cache, std::uint64_t range) {
  const auto needed = static_cast<std::uint64_t>(oversubscription_ratio * static_cast<double>(cache));
  const std::uint64_t threads = (needed + range - 1) / range;
  return (threads + detail::warp_lanes - 1) / detail::warp_lanes * detail::warp_lanes;
}

/// A heap for every point and both layouts, so that the modes compare one heap size.
std::uint64_t heap_bytes_for_points(const std::vector<AccessPoint>& points) {
  std::uint64_t bytes = 0;
  for (const AccessPoint& pt : points)
    for (const HeapLayout layout : {HeapLayout::aligned, HeapLayout::contiguous})
      bytes = std::max(bytes, heap_bytes_for(layout, pt.threads, pt.range_bytes));
  return bytes;
}

/// Refuses, before anything runs, managed points that would not stay in core.
void require_in_core(const std::vector<AccessPoint>& points, std::uint64_t capacity, HeapLayout layout) {
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  for (const AccessPoint& pt : points) {
    const std::uint64_t bytes =
        place_warp_regions(capacity, layout, detail::LaneOrder::lane_id, pt.threads, pt.range_bytes).extent_bytes;
    if (bytes + managed_headroom_bytes > free_bytes)
      throw std::runtime_error("managed modes run in core only: " + pt.workload + " with " +
                               std::to_string(pt.threads) + " threads x " + std::to_string(pt.range_bytes) +
                               " B needs " + std::to_string(bytes) + " B of managed memory, more than the GPU's " +
                               std::to_string(free_bytes) + " B free less 4 GiB; use fewer threads or smaller ranges");
  }
}

}  // namespace

bool run_access_workloads(const AccessSetup& setup, const std::vector<std::string>& workloads,
                          const std::vector<std::string>& modes, const Options& options, Recorder& recorder) {
  std::vector<AccessPoint> in_core, oversubscribed;
  for (const std::string& w : workloads) {
    if (w == "random_access") {
      for (const std::uint64_t range : setup.ranges) in_core.push_back({w, setup.threads, range, setup.accesses});
    } else if (w == "large_ranges") {
      in_core.push_back({w, setup.large_threads, setup.large_range, setup.large_accesses});
    } else if (w == "oversubscription") {
      const std::uint64_t threads = setup.oversub_threads != 0
                                        ? setup.oversub_threads
                                        : oversubscribing_threads(setup.oversub_cache, setup.oversub_range);
      oversubscribed.push_back({w, threads, setup.oversub_range, setup.oversub_accesses, setup.oversub_cache});
    }
  }
  const std::uint64_t in_core_heap = heap_bytes_for_points(in_core);
  const std::uint64_t oversubscribed_heap = heap_bytes_for_points(oversubscribed);
  const auto layout_of = [](const std::string& mode) {
    return mode.ends_with("_contiguous") ? HeapLayout::contiguous : HeapLayout::aligned;
  };
  bool any_managed = false;
  for (const std::string& mode : modes) {
    if (!mode.starts_with("managed_")) continue;
    any_managed = true;
    require_in_core(in_core, in_core_heap, layout_of(mode));
  }
  AccessRunner runner(options, recorder, setup.lane_order, setup.offsets, any_managed);
  bool all_verified = true;
  for (const std::string& mode : modes) {
    const HeapLayout layout = layout_of(mode);
    if (mode.starts_with("managed_")) {
      if (!oversubscribed.empty())
        std::fprintf(stderr, "warpvm-alloc-bench: %s skips oversubscription (real UVM runs in core only)\n",
                     mode.c_str());
      all_verified = runner.managed_points(mode, in_core, in_core_heap, layout) && all_verified;
      continue;
    }
    const bool uvm_preset = mode.starts_with("warpvm_uvm_");
    all_verified = runner.heap_points(mode, in_core, in_core_heap, layout, uvm_preset) && all_verified;
    if (uvm_preset && !WARPVM_HOST_BATCHED_EVICTION && !oversubscribed.empty()) {
      std::fprintf(stderr,
                   "warpvm-alloc-bench: %s skips oversubscription (the uvm preset evicts only in a build with "
                   "-DWARPVM_HOST_BATCHED_EVICTION=ON)\n",
                   mode.c_str());
      continue;
    }
    all_verified = runner.heap_points(mode, oversubscribed, oversubscribed_heap, layout, uvm_preset) && all_verified;
  }
  return all_verified;
}

}  // namespace warpvm::bench
