// warpvm-alloc-bench: device-side allocation (issue #4's Section VII benchmarks, the first
// three). Singular and scaling points: `threads` threads each allocate a size drawn from
// [lo, hi] (alloc kernel, timed alone with CUDA events), then write the first and last 4-byte
// word of their allocation, verify both and free (untimed). Points:
//
//   singular   16K threads, sizes in [2^n, 2^(n+1)) for n = 4..22
//   scaling    32K, 256K and 1M threads at exactly 16 B, 1 KB, 4 KB and 8 KB (the issue's
//              Gallatin/CUDA target shapes)
//   random     16K threads, each with `slots` slots (the live-block cap: threads x slots), for
//              `iterations` steps: each thread picks one of its slots at random; a live block
//              there has its first and last word checked and is freed, an empty one gets a new
//              block of 1-256 KB whose first and last word are written. Every step's kernel is
//              timed (allocations and frees together); what is live at the end is checked and
//              freed.
//
// Modes:
//   warpvm_aligned      warpvm::Heap with AlignMalloc's layout (HeapLayout::aligned)
//   warpvm_contiguous   warpvm::Heap with each thread's bytes in one piece
//   warpvm_host_only    warpvm_aligned without the small-request fast path: every request a
//                       host round trip (what the fast path saves)
//   cuda_malloc         CUDA's device malloc/free, its heap sized by cudaDeviceSetLimit
//
// The access workloads (random_access, large_ranges, oversubscription; modes warpvm_aligned,
// warpvm_contiguous, warpvm_uvm_aligned, warpvm_uvm_contiguous, managed_aligned,
// managed_contiguous) are access_bench.cu's; --modes picks from both lists, each workload
// running the modes of its own list (all of them when --modes is not given).
//
// JSON Lines (bench/common's Recorder), one record per point: seconds (median alloc kernel; for
// random, median step), verified (every thread given memory read back what it wrote and,
// warpvm, every region and small block went back to the heap and the host refused exactly the
// threads that got null), extra: threads, size_lo, size_hi, failed (threads given null, per run:
// a point larger than the heap fails by design, which is no wrong result), requests (host
// round trips per run; 0 where the fast path served everything) and peak_reserved_bytes
// (warpvm); random adds slots, iterations, frees. Exits 1 only when a point is not verified.

#include "harness.cuh"
#include "access_bench.hpp"
#include "warpvm/workloads/alloc/alloc_workloads.hpp"
#include "cli.hpp"

#include "warpvm/heap.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

using workloads::point_bytes;
using workloads::random_slot;
using workloads::random_bytes;

struct Setup {
  std::uint64_t singular_threads = 16384;
  unsigned min_n = 4, max_n = 22;
  std::vector<std::uint64_t> scaling_threads{32768, 262144, 1048576};
  std::vector<std::uint64_t> scaling_sizes{16, 1024, 4096, 8192};
  std::uint64_t random_threads = 16384, random_lo = 1024, random_hi = 256 << 10;
  std::uint32_t random_slots = 8, random_iterations = 50;
  std::uint64_t heap_bytes = 32ull << 30;
  std::uint64_t small_bytes = 0;  ///< HeapOptions::small_bytes (0: a quarter of the heap, at most 8 GiB)
  std::uint64_t cache_bytes = 8ull << 30;
  std::uint64_t cuda_heap_bytes = 0;  ///< 0: the largest point's total, within 40% of device memory
  AccessSetup access;                 ///< random_access, large_ranges, oversubscription
};

struct Point {
  std::string workload;
  std::uint64_t threads, lo, hi;
  std::uint32_t slots = 1, iterations = 0;  ///< random: slots per thread and steps
  /// The most bytes live at once.
  [[nodiscard]] std::uint64_t peak_bytes() const { return threads * slots * hi; }
};

__device__ std::uint32_t stamp(std::uint64_t seed, std::uint64_t thread, bool last) {
  return static_cast<std::uint32_t>(seed * 2654435761ull + thread * 2 + (last ? 1 : 0)) | 1u;
}

// ---- warpvm::Heap ----------------------------------------------------------------------------

__global__ void heap_alloc(device_heap heap, heap_ptr* ptrs, std::uint64_t threads, std::uint64_t seed,
                           std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t t = thread_index();
  if (t < threads) ptrs[t] = heap.malloc(point_bytes(seed, t, lo, hi));
}

__global__ void heap_write(device_heap heap, const heap_ptr* ptrs, std::uint64_t threads, std::uint64_t seed,
                           std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t t = thread_index();
  if (t >= threads || !ptrs[t]) return;
  const std::uint64_t last = point_bytes(seed, t, lo, hi) / 4 - 1;
  heap.store<std::uint32_t>(ptrs[t], 0, stamp(seed, t, false));
  heap.store<std::uint32_t>(ptrs[t], last, stamp(seed, t, true));
}

__global__ void heap_verify_free(device_heap heap, const heap_ptr* ptrs, std::uint64_t threads, std::uint64_t seed,
                                 std::uint64_t lo, std::uint64_t hi, unsigned long long* counts) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  const heap_ptr p = ptrs[t];
  if (!p) {
    atomicAdd(counts + 1, 1ull);
    return;
  }
  const std::uint64_t last = point_bytes(seed, t, lo, hi) / 4 - 1;
  if (heap.load<std::uint32_t>(p, 0) != stamp(seed, t, false) || heap.load<std::uint32_t>(p, last) != stamp(seed, t, true))
    atomicAdd(counts, 1ull);
  heap.free(p);
}

// ---- CUDA's device malloc --------------------------------------------------------------------

__global__ void cuda_alloc(std::uint32_t** ptrs, std::uint64_t threads, std::uint64_t seed, std::uint64_t lo,
                           std::uint64_t hi) {
  const std::uint64_t t = thread_index();
  if (t < threads) ptrs[t] = static_cast<std::uint32_t*>(malloc(point_bytes(seed, t, lo, hi)));
}

__global__ void cuda_write(std::uint32_t* const* ptrs, std::uint64_t threads, std::uint64_t seed, std::uint64_t lo,
                           std::uint64_t hi) {
  const std::uint64_t t = thread_index();
  if (t >= threads || ptrs[t] == nullptr) return;
  ptrs[t][0] = stamp(seed, t, false);
  ptrs[t][point_bytes(seed, t, lo, hi) / 4 - 1] = stamp(seed, t, true);
}

__global__ void cuda_verify_free(std::uint32_t* const* ptrs, std::uint64_t threads, std::uint64_t seed,
                                 std::uint64_t lo, std::uint64_t hi, unsigned long long* counts) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  std::uint32_t* p = ptrs[t];
  if (p == nullptr) {
    atomicAdd(counts + 1, 1ull);
    return;
  }
  if (p[0] != stamp(seed, t, false) || p[point_bytes(seed, t, lo, hi) / 4 - 1] != stamp(seed, t, true))
    atomicAdd(counts, 1ull);
  free(p);
}

// ---- random alloc/free ------------------------------------------------------------------------

/// CUDA's malloc behind HeapMemory's face (access_bench.hpp), for the random workload's kernels.
struct CudaMemory {
  using pointer = std::uint32_t*;
  __device__ pointer allocate(std::uint64_t bytes) const { return static_cast<pointer>(malloc(bytes)); }
  __device__ void release(pointer p) const { free(p); }
  __device__ std::uint32_t load(pointer p, std::uint64_t word) const { return p[word]; }
  __device__ void store(pointer p, std::uint64_t word, std::uint32_t value) const { p[word] = value; }
};

/// What the random workload keeps per slot (slot i: thread i / slots): the block, the bytes
/// asked for (0: empty) and the stamp written to its first word (its complement to the last).
template <class Memory>
struct Slots {
  typename Memory::pointer* ptrs;
  std::uint32_t* bytes;
  std::uint32_t* stamps;
};

/// Checks slot i's block (counts[0]: mismatches) and frees it.
template <class Memory>
__device__ void check_and_free(const Memory& memory, const Slots<Memory>& slots, std::uint64_t i,
                               unsigned long long* counts) {
  const auto p = slots.ptrs[i];
  const std::uint64_t last = slots.bytes[i] / 4 - 1;
  if (memory.load(p, 0) != slots.stamps[i] || memory.load(p, last) != ~slots.stamps[i]) atomicAdd(counts, 1ull);
  memory.release(p);
  slots.bytes[i] = 0;
  atomicAdd(counts + 2, 1ull);
}

/// One step: each thread picks a slot; a live block there is checked and freed, an empty slot
/// gets a new block (counts[1]: nulls) with its first and last word written. Allocating and
/// freeing lanes are divergent, as in a real program.
template <class Memory>
__global__ void random_step(Memory memory, Slots<Memory> slots, std::uint64_t threads, std::uint32_t per_thread,
                            std::uint64_t step, std::uint64_t lo, std::uint64_t hi, unsigned long long* counts) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  const std::uint64_t i = random_slot(step, t, per_thread);
  if (slots.bytes[i] != 0) {
    check_and_free(memory, slots, i, counts);
    return;
  }
  const std::uint64_t bytes = random_bytes(step, t, lo, hi);
  const auto p = memory.allocate(bytes);
  if (!p) {
    atomicAdd(counts + 1, 1ull);
    return;
  }
  const std::uint32_t stamp_value = stamp(step, i, false);
  memory.store(p, 0, stamp_value);
  memory.store(p, bytes / 4 - 1, ~stamp_value);
  slots.ptrs[i] = p;
  slots.bytes[i] = static_cast<std::uint32_t>(bytes);
  slots.stamps[i] = stamp_value;
}

/// Checks and frees every block still live.
template <class Memory>
__global__ void random_drain(Memory memory, Slots<Memory> slots, std::uint64_t count, unsigned long long* counts) {
  const std::uint64_t i = thread_index();
  if (i < count && slots.bytes[i] != 0) check_and_free(memory, slots, i, counts);
}

// ---- harness ---------------------------------------------------------------------------------

struct Outcome {
  std::vector<double> seconds;
  std::uint64_t mismatches = 0, failed = 0;  ///< of the timed rounds
  std::uint64_t failed_all_rounds = 0;       ///< the warm-up's nulls too
};

/// Times `alloc` alone with events on `stream`: one warm-up round, then `repeats`; each round
/// then runs `finish` (write, verify, free), waits with `wait` and adds its mismatches and nulls.
template <class Alloc, class Finish, class Wait>
Outcome run_rounds(cudaStream_t stream, int repeats, Alloc&& alloc, Finish&& finish, Wait&& wait) {
  Outcome o;
  DeviceBuffer<unsigned long long> counts(2);
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int round = 0; round <= repeats; ++round) {
    const auto seed = static_cast<std::uint64_t>(round + 1);
    check(cudaMemsetAsync(counts.data, 0, 2 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    alloc(seed);
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    finish(seed, counts.data);
    wait();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    unsigned long long c[2] = {0, 0};
    check(cudaMemcpy(c, counts.data, sizeof c, cudaMemcpyDeviceToHost), "cudaMemcpy");
    o.failed_all_rounds += c[1];
    if (round == 0) continue;  // warm-up
    o.seconds.push_back(ms / 1e3);
    o.mismatches += c[0];
    o.failed += c[1];
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return o;
}

Record measure_heap(Runtime& rt, Heap& heap, const Point& pt, int repeats) {
  DeviceBuffer<heap_ptr> ptrs(pt.threads);
  heap.reset_stats();
  // The alloc kernel is launched directly so that the timed span holds no host-side checks.
  rt.check_launch(reinterpret_cast<const void*>(heap_alloc), grid_for(pt.threads), dim3(block_threads), 0);
  const Outcome o = run_rounds(
      rt.stream(), repeats,
      [&](std::uint64_t seed) {
        heap_alloc<<<grid_for(pt.threads), block_threads, 0, rt.stream()>>>(heap.device(), ptrs.data, pt.threads, seed,
                                                                            pt.lo, pt.hi);
        check(cudaGetLastError(), "heap_alloc launch");
      },
      [&](std::uint64_t seed, unsigned long long* counts) {
        rt.launch(heap_write, grid_for(pt.threads), dim3(block_threads), 0, heap.device(), ptrs.data, pt.threads,
                  seed, pt.lo, pt.hi);
        rt.launch(heap_verify_free, grid_for(pt.threads), dim3(block_threads), 0, heap.device(), ptrs.data,
                  pt.threads, seed, pt.lo, pt.hi, counts);
      },
      // A kernel that trapped (the heap's watchdog) raises its recorded Error, not a bare
      // cudaErrorLaunchFailure.
      [&] { rt.synchronize(); });
  const HeapStats stats = heap.stats();
  Record r;
  r.seconds = o.seconds;
  // Nulls are no wrong result (they are counted in `failed`), but each must be one the service
  // refused: its count (every round since reset_stats) matches the threads that saw null.
  r.verified = o.mismatches == 0 && stats.reserved_bytes == 0 && stats.small_live_blocks == 0 &&
               stats.failed_allocations == o.failed_all_rounds;
  r.extra["failed"] = static_cast<double>(o.failed) / repeats;
  r.extra["requests"] = static_cast<double>(stats.requests) / (repeats + 1);
  r.extra["peak_reserved_bytes"] = static_cast<double>(stats.peak_reserved_bytes);
  return r;
}

Record measure_cuda(cudaStream_t stream, const Point& pt, int repeats) {
  DeviceBuffer<std::uint32_t*> ptrs(pt.threads);
  const Outcome o = run_rounds(
      stream, repeats,
      [&](std::uint64_t seed) {
        cuda_alloc<<<grid_for(pt.threads), block_threads, 0, stream>>>(ptrs.data, pt.threads, seed, pt.lo, pt.hi);
        check(cudaGetLastError(), "cuda_alloc launch");
      },
      [&](std::uint64_t seed, unsigned long long* counts) {
        cuda_write<<<grid_for(pt.threads), block_threads, 0, stream>>>(ptrs.data, pt.threads, seed, pt.lo, pt.hi);
        check(cudaGetLastError(), "cuda_write launch");
        cuda_verify_free<<<grid_for(pt.threads), block_threads, 0, stream>>>(ptrs.data, pt.threads, seed, pt.lo,
                                                                             pt.hi, counts);
        check(cudaGetLastError(), "cuda_verify_free launch");
      },
      [&] { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); });
  Record r;
  r.seconds = o.seconds;
  r.verified = o.mismatches == 0;  // nulls are counted in `failed`
  r.extra["failed"] = static_cast<double>(o.failed) / repeats;
  return r;
}

struct RandomOutcome {
  std::vector<double> seconds;  ///< per step
  std::uint64_t mismatches = 0, nulls = 0, frees = 0;
};

/// The random workload over `memory`: every step timed with events on `stream` (each waited for
/// with `wait`), then the drain.
template <class Memory, class Wait>
RandomOutcome run_random(cudaStream_t stream, const Memory& memory, const Point& pt, Wait&& wait) {
  const std::uint64_t count = pt.threads * pt.slots;
  DeviceBuffer<typename Memory::pointer> ptrs(count);
  DeviceBuffer<std::uint32_t> bytes(count), stamps(count);
  DeviceBuffer<unsigned long long> counts(3);
  check(cudaMemsetAsync(bytes.data, 0, count * sizeof(std::uint32_t), stream), "cudaMemsetAsync");
  check(cudaMemsetAsync(counts.data, 0, 3 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
  const Slots<Memory> slots{ptrs.data, bytes.data, stamps.data};
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  RandomOutcome o;
  for (std::uint32_t step = 0; step < pt.iterations; ++step) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    random_step<<<grid_for(pt.threads), block_threads, 0, stream>>>(memory, slots, pt.threads, pt.slots, step, pt.lo,
                                                                    pt.hi, counts.data);
    check(cudaGetLastError(), "random_step launch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    wait();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    o.seconds.push_back(ms / 1e3);
  }
  random_drain<<<grid_for(count), block_threads, 0, stream>>>(memory, slots, count, counts.data);
  check(cudaGetLastError(), "random_drain launch");
  wait();
  unsigned long long c[3] = {0, 0, 0};
  check(cudaMemcpy(c, counts.data, sizeof c, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  o.mismatches = c[0];
  o.nulls = c[1];
  o.frees = c[2];
  return o;
}

Record measure_heap_random(Runtime& rt, Heap& heap, const Point& pt) {
  heap.reset_stats();
  rt.check_launch(reinterpret_cast<const void*>(random_step<HeapMemory>), grid_for(pt.threads), dim3(block_threads),
                  0);
  const RandomOutcome o = run_random(rt.stream(), HeapMemory{heap.device()}, pt, [&] { rt.synchronize(); });
  const HeapStats stats = heap.stats();
  Record r;
  r.seconds = o.seconds;
  r.verified = o.mismatches == 0 && stats.reserved_bytes == 0 && stats.small_live_blocks == 0 &&
               stats.failed_allocations == o.nulls;
  r.extra["failed"] = static_cast<double>(o.nulls);
  r.extra["frees"] = static_cast<double>(o.frees);
  r.extra["requests"] = static_cast<double>(stats.requests);
  r.extra["peak_reserved_bytes"] = static_cast<double>(stats.peak_reserved_bytes);
  return r;
}

Record measure_cuda_random(cudaStream_t stream, const Point& pt) {
  const RandomOutcome o =
      run_random(stream, CudaMemory{}, pt, [&] { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); });
  Record r;
  r.seconds = o.seconds;
  r.verified = o.mismatches == 0;
  r.extra["failed"] = static_cast<double>(o.nulls);
  r.extra["frees"] = static_cast<double>(o.frees);
  return r;
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "alloc";
  Setup setup;
  const std::vector<std::string> alloc_modes{"warpvm_aligned", "warpvm_contiguous", "warpvm_host_only", "cuda_malloc"};
  std::vector<std::string> modes;  // empty: each workload's defaults
  std::vector<std::string> workloads{"singular", "scaling", "random"};
  CLI::App app{"warpvm-alloc-bench: device-side allocation, JSON Lines out.\n"
               "allocation workloads: singular, scaling, random; modes warpvm_aligned, warpvm_contiguous, "
               "warpvm_host_only, cuda_malloc\n"
               "access workloads: random_access, large_ranges, oversubscription; modes warpvm_aligned, warpvm_contiguous, "
               "warpvm_uvm_aligned, warpvm_uvm_contiguous, managed_aligned, managed_contiguous",
               "warpvm-alloc-bench"};
  warpvm::cli::add_list(app, "--workloads", workloads, "workloads to run (default: singular, scaling, random)");
  warpvm::cli::add_list(app, "--modes", modes, "modes to run (default: each workload's)");
  app.add_option("--threads", setup.singular_threads, "singular: threads");
  app.add_option("--min-n", setup.min_n, "singular: smallest size 2^n");
  app.add_option("--max-n", setup.max_n, "singular: largest size 2^n");
  warpvm::cli::add_bytes_list(app, "--scaling-threads", setup.scaling_threads, "scaling: thread counts");
  warpvm::cli::add_bytes_list(app, "--scaling-sizes", setup.scaling_sizes, "scaling: allocation sizes");
  app.add_option("--random-threads", setup.random_threads, "random: threads")->check(CLI::PositiveNumber);
  warpvm::cli::add_bytes(app, "--random-lo", setup.random_lo, "random: smallest allocation");
  warpvm::cli::add_bytes(app, "--random-hi", setup.random_hi, "random: largest allocation");
  app.add_option("--slots", setup.random_slots, "random: slots per thread")->check(CLI::PositiveNumber);
  app.add_option("--iterations", setup.random_iterations, "random: alloc/free rounds")->check(CLI::PositiveNumber);
  warpvm::cli::add_bytes(app, "--heap", setup.heap_bytes, "warpvm heap capacity");
  warpvm::cli::add_bytes(app, "--small", setup.small_bytes, "warpvm heap's small-block region");
  warpvm::cli::add_bytes(app, "--cache", setup.cache_bytes, "warpvm's cache for the allocation workloads");
  warpvm::cli::add_bytes(app, "--cuda-heap", setup.cuda_heap_bytes, "CUDA's device malloc heap (default: sized to the points)");
  app.add_option("--repeats", options.repeats, "timed runs per point")->check(CLI::PositiveNumber);
  app.add_option("--out", options.out, "JSON Lines file to append to ('-': stdout)");
  app.add_option("--commit", options.commit, "commit, for the records");
  app.add_option("--driver", options.driver, "driver version, for the records");
  app.add_option("--access-threads", setup.access.threads, "random_access: threads");
  warpvm::cli::add_bytes_list(app, "--ranges", setup.access.ranges, "random_access: range sizes");
  app.add_option("--accesses", setup.access.accesses, "random_access: accesses per thread");
  app.add_option("--large-threads", setup.access.large_threads, "large_ranges: threads");
  warpvm::cli::add_bytes(app, "--large-range", setup.access.large_range, "large_ranges: range size");
  app.add_option("--large-accesses", setup.access.large_accesses, "large_ranges: accesses per thread");
  warpvm::cli::add_bytes(app, "--oversub-range", setup.access.oversub_range, "oversubscription: range size");
  app.add_option("--oversub-accesses", setup.access.oversub_accesses, "oversubscription: accesses per thread");
  warpvm::cli::add_bytes(app, "--oversub-cache", setup.access.oversub_cache, "oversubscription: cache, whole 2 MiB chunks");
  app.add_option("--oversub-threads", setup.access.oversub_threads, "oversubscription: threads (0: >= 2.5x the cache)");
  app.add_option_function<std::string>(
         "--lane-order",
         [&setup](const std::string& v) {
           setup.access.lane_order = v == "lane_id" ? warpvm::detail::LaneOrder::lane_id : warpvm::detail::LaneOrder::prefetch_first;
         },
         "the transposed layout's lane order")
      ->check(CLI::IsMember({"lane_id", "prefetch_first"}));
  app.add_option_function<std::string>(
         "--access-offsets",
         [&setup](const std::string& v) {
           setup.access.offsets = v == "per_thread" ? warpvm::workloads::AccessOffsets::per_thread : warpvm::workloads::AccessOffsets::per_warp;
         },
         "where each thread's accesses start")
      ->check(CLI::IsMember({"per_thread", "per_warp"}));
  app.add_option("--uvm-counted-runs", options.uvm_counted_runs, "untimed runs per managed point whose traffic CUPTI counts");
  warpvm::cli::parse(app, argc, argv);
  const auto usage = [&app](const std::string& message) { warpvm::cli::refuse(app, message); };
  if (options.repeats < 1 || setup.min_n < 2 || setup.min_n > setup.max_n || setup.max_n > 40) usage("bad sizes");
  // The random workload writes two distinct words and keeps sizes in 32 bits.
  if (setup.random_lo < 8 || setup.random_lo > setup.random_hi || setup.random_hi > ~std::uint32_t{0})
    usage("bad --random-lo/--random-hi: need 8 <= lo <= hi < 4 GiB");
  if (setup.random_slots < 1 || setup.random_iterations < 1 || setup.random_threads < 1)
    usage("bad --random-threads/--slots/--iterations: each at least 1");
  for (const std::uint64_t size : setup.scaling_sizes)
    if (size < 4) usage("bad --scaling-sizes: each at least 4 bytes (a thread writes a 4-byte word)");
  // The access workloads address whole 4-byte words, at most 2^32 of them per range.
  const AccessSetup& access = setup.access;
  std::vector<std::uint64_t> access_ranges = access.ranges;
  access_ranges.insert(access_ranges.end(), {access.large_range, access.oversub_range});
  for (const std::uint64_t range : access_ranges)
    if (range < 4 || range % 4 != 0 || range > (std::uint64_t{4} << 32))
      usage("bad --ranges/--large-range/--oversub-range: each a multiple of 4 bytes, from 4 B to 16 GiB");
  if (access.ranges.empty() || access.threads < 1 || access.large_threads < 1 || access.accesses < 1 ||
      access.large_accesses < 1 || access.oversub_accesses < 1 || options.uvm_counted_runs < 1)
    usage("bad access shape: --ranges needs a size, and threads, accesses and --uvm-counted-runs at least 1 each");
  if (access.oversub_cache < (2u << 20) || access.oversub_cache % (2u << 20) != 0)
    usage("bad --oversub-cache: whole 2 MiB chunks (the uvm preset caches whole chunks)");

  // Each workload runs the modes of its own list: the allocation modes or the access modes.
  std::vector<std::string> access_asked;
  for (const std::string& w : workloads)
    if (std::find(access_workloads.begin(), access_workloads.end(), w) != access_workloads.end())
      access_asked.push_back(w);
  std::erase_if(workloads, [&](const std::string& w) {
    return std::find(access_asked.begin(), access_asked.end(), w) != access_asked.end();
  });
  const auto pick = [&](const std::vector<std::string>& known, const std::vector<std::string>& defaults) {
    if (modes.empty()) return defaults;
    std::vector<std::string> picked;
    for (const std::string& m : modes)
      if (std::find(known.begin(), known.end(), m) != known.end()) picked.push_back(m);
    return picked;
  };
  for (const std::string& m : modes)
    if (std::find(alloc_modes.begin(), alloc_modes.end(), m) == alloc_modes.end() &&
        std::find(access_modes.begin(), access_modes.end(), m) == access_modes.end())
      usage("unknown mode " + m);
  const std::vector<std::string> access_run = pick(access_modes, access_modes);
  modes = pick(alloc_modes, {"warpvm_aligned", "warpvm_contiguous", "cuda_malloc"});
  if ((!access_asked.empty() && access_run.empty()) || (!workloads.empty() && modes.empty()))
    usage("no mode of --modes applies to some workload asked for (each workload's modes are listed above)");

  std::vector<Point> points;
  for (const std::string& w : workloads) {
    if (w == "singular") {
      for (unsigned n = setup.min_n; n <= setup.max_n; ++n)
        points.push_back({w, setup.singular_threads, std::uint64_t{1} << n, (std::uint64_t{2} << n) - 1});
    } else if (w == "scaling") {
      for (const std::uint64_t size : setup.scaling_sizes)
        for (const std::uint64_t threads : setup.scaling_threads) points.push_back({w, threads, size, size});
    } else if (w == "random") {
      points.push_back({w, setup.random_threads, setup.random_lo, setup.random_hi, setup.random_slots,
                        setup.random_iterations});
    } else {
      usage("unknown workload " + w);
    }
  }
  if (warpvm::device_count() == 0) {
    std::fprintf(stderr, "warpvm-alloc-bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  if (points.empty()) modes.clear();
  try {
    // CUDA's heap is fixed before any kernel runs: the largest point's total, within 40% of
    // the device, so that it and the warpvm cache fit together.
    if (std::find(modes.begin(), modes.end(), "cuda_malloc") != modes.end()) {
      std::uint64_t largest = 0;
      for (const Point& pt : points) largest = std::max(largest, pt.peak_bytes());
      std::size_t free_bytes = 0, total_bytes = 0;
      check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      const std::uint64_t fit = largest + largest / 4 + (64ull << 20);
      const std::uint64_t bytes = setup.cuda_heap_bytes != 0 ? setup.cuda_heap_bytes
                                                             : std::min<std::uint64_t>(fit, total_bytes / 10 * 4);
      check(cudaDeviceSetLimit(cudaLimitMallocHeapSize, bytes), "cudaDeviceSetLimit(cudaLimitMallocHeapSize)");
      setup.cuda_heap_bytes = bytes;
    }
    Recorder recorder(options);
    bool all_verified = true;
    // The allocation workloads' runtime (--cache), only when they run: the access workloads
    // make their own, sized to their heaps.
    std::optional<warpvm::Runtime> runtime;
    if (!modes.empty())
      runtime.emplace(warpvm::Config{.cache_bytes = setup.cache_bytes, .max_pages_held_per_thread = 2});
    for (const std::string& mode : modes) {
      warpvm::Runtime& rt = *runtime;
      std::optional<warpvm::Heap> heap;
      if (mode != "cuda_malloc")
        heap.emplace(rt, warpvm::HeapOptions{.capacity_bytes = setup.heap_bytes,
                                             .layout = mode == "warpvm_contiguous" ? warpvm::HeapLayout::contiguous
                                                                                   : warpvm::HeapLayout::aligned,
                                             .fast_path = mode != "warpvm_host_only",
                                             .small_bytes = setup.small_bytes});
      for (const Point& pt : points) {
        const bool random = pt.workload == "random";
        Record r;
        if (heap)
          r = random ? measure_heap_random(rt, *heap, pt) : measure_heap(rt, *heap, pt, options.repeats);
        else
          r = random ? measure_cuda_random(rt.stream(), pt) : measure_cuda(rt.stream(), pt, options.repeats);
        r.workload = pt.workload;
        r.mode = mode;
        r.policy = mode == "cuda_malloc" ? "cuda_heap_" + std::to_string(setup.cuda_heap_bytes >> 20) + "MiB"
                                         : "heap_" + std::to_string(setup.heap_bytes >> 20) + "MiB";
        r.cache_fraction = 1;
        std::uint64_t requested = 0;  // of the first timed round (seed 2); the others are alike
        for (std::uint64_t t = 0; t < pt.threads && !random; ++t) requested += point_bytes(2, t, pt.lo, pt.hi);
        r.dataset_bytes = r.useful_bytes = random ? pt.peak_bytes() : requested;  // random: the live-byte cap
        if (random) {
          r.extra["slots"] = pt.slots;
          r.extra["iterations"] = pt.iterations;
        }
        r.extra["threads"] = static_cast<double>(pt.threads);
        r.extra["size_lo"] = static_cast<double>(pt.lo);
        r.extra["size_hi"] = static_cast<double>(pt.hi);
        all_verified = all_verified && r.verified;
        recorder.write(r);
      }
    }
    runtime.reset();
    if (!access_asked.empty())
      all_verified = run_access_workloads(setup.access, access_asked, access_run, options, recorder) && all_verified;
    return all_verified ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-alloc-bench: %s\n", e.what());
    return 1;
  }
}
