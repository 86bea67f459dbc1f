// warpvm-alloc-bench: device-side allocation (issue #4's Section VII benchmarks, the first two).
// Each point: `threads` threads each allocate a size drawn from [lo, hi] (alloc kernel, timed
// alone with CUDA events), then write the first and last 4-byte word of their allocation,
// verify both and free (untimed). Points:
//
//   singular   16K threads, sizes in [2^n, 2^(n+1)) for n = 4..22
//   scaling    128 .. 256K threads at exactly 1 KB and 8 KB
//
// Modes:
//   warpvm_aligned      warpvm::Heap with AlignMalloc's layout (HeapLayout::aligned)
//   warpvm_contiguous   warpvm::Heap with each thread's bytes in one piece
//   cuda_malloc         CUDA's device malloc/free, its heap sized by cudaDeviceSetLimit
//
// JSON Lines (bench/micro's Recorder), one record per point: seconds (median alloc kernel),
// verified (every thread given memory read back what it wrote and, warpvm, every region went
// back to the heap), extra: threads, size_lo, size_hi, failed (threads given null, per run: a
// point larger than the heap fails by design, which is no wrong result), requests and
// peak_reserved_bytes (warpvm). Exits 1 only when a point is not verified.

#include "../micro/bench_support.cuh"
#include "cli_args.hpp"

#include "warpvm/heap.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

struct Setup {
  std::uint64_t singular_threads = 16384;
  unsigned min_n = 4, max_n = 22;
  std::vector<std::uint64_t> scaling_threads{128, 512, 2048, 8192, 32768, 131072, 262144};
  std::vector<std::uint64_t> scaling_sizes{1024, 8192};
  std::uint64_t heap_bytes = 32ull << 30;
  std::uint64_t cache_bytes = 8ull << 30;
  std::uint64_t cuda_heap_bytes = 0;  ///< 0: the largest point's total, within 40% of device memory
};

struct Point {
  std::string workload;
  std::uint64_t threads, lo, hi;
};

constexpr unsigned block_threads = 256;

__host__ __device__ std::uint64_t point_bytes(std::uint64_t seed, std::uint64_t thread, std::uint64_t lo,
                                              std::uint64_t hi) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + thread;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return lo + (x ^ (x >> 31)) % (hi - lo + 1);
}
__device__ std::uint32_t stamp(std::uint64_t seed, std::uint64_t thread, bool last) {
  return static_cast<std::uint32_t>(seed * 2654435761ull + thread * 2 + (last ? 1 : 0)) | 1u;
}
__device__ std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

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

// ---- harness ---------------------------------------------------------------------------------

struct Outcome {
  std::vector<double> seconds;
  std::uint64_t mismatches = 0, failed = 0;  ///< of the timed rounds
  std::uint64_t failed_all_rounds = 0;       ///< the warm-up's nulls too
};

/// Times `alloc` alone with events on `stream`: one warm-up round, then `repeats`; each round
/// then runs `finish` (write, verify, free) and adds its mismatches and nulls.
template <class Alloc, class Finish>
Outcome run_rounds(cudaStream_t stream, int repeats, Alloc&& alloc, Finish&& finish) {
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
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
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

dim3 grid_for(std::uint64_t threads) { return dim3(static_cast<unsigned>((threads + block_threads - 1) / block_threads)); }

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
      });
  rt.synchronize();  // raises device-side errors
  const HeapStats stats = heap.stats();
  Record r;
  r.seconds = o.seconds;
  // Nulls are no wrong result (they are counted in `failed`), but each must be one the service
  // refused: its count (every round since reset_stats) matches the threads that saw null.
  r.verified = o.mismatches == 0 && stats.reserved_bytes == 0 && stats.failed_allocations == o.failed_all_rounds;
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
      });
  Record r;
  r.seconds = o.seconds;
  r.verified = o.mismatches == 0;  // nulls are counted in `failed`
  r.extra["failed"] = static_cast<double>(o.failed) / repeats;
  return r;
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-alloc-bench [--workloads singular,scaling] "
               "[--modes warpvm_aligned,warpvm_contiguous,cuda_malloc] [--threads 16384] [--min-n 4] [--max-n 22] "
               "[--scaling-threads 128,...,262144] [--scaling-sizes 1024,8192] [--heap 32GiB] [--cache 8GiB] "
               "[--cuda-heap BYTES] [--repeats 3] [--out file.jsonl] [--commit SHA] [--driver VER]\n",
               message);
  std::exit(2);
}

std::vector<std::uint64_t> parse_list(const std::string& value) {
  std::vector<std::uint64_t> out;
  for (const std::string& v : tools::split_list(value)) out.push_back(tools::parse_bytes(v));
  return out;
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "alloc";
  Setup setup;
  std::vector<std::string> modes{"warpvm_aligned", "warpvm_contiguous", "cuda_malloc"};
  std::vector<std::string> workloads{"singular", "scaling"};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("warpvm-alloc-bench: device-side allocation, JSON Lines out");
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    try {
      if (flag == "--modes") modes = warpvm::tools::split_list(value);
      else if (flag == "--workloads") workloads = warpvm::tools::split_list(value);
      else if (flag == "--threads") setup.singular_threads = std::stoull(value);
      else if (flag == "--min-n") setup.min_n = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--max-n") setup.max_n = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--scaling-threads") setup.scaling_threads = parse_list(value);
      else if (flag == "--scaling-sizes") setup.scaling_sizes = parse_list(value);
      else if (flag == "--heap") setup.heap_bytes = warpvm::tools::parse_bytes(value);
      else if (flag == "--cache") setup.cache_bytes = warpvm::tools::parse_bytes(value);
      else if (flag == "--cuda-heap") setup.cuda_heap_bytes = warpvm::tools::parse_bytes(value);
      else if (flag == "--repeats") options.repeats = std::stoi(value);
      else if (flag == "--out") options.out = value;
      else if (flag == "--commit") options.commit = value;
      else if (flag == "--driver") options.driver = value;
      else usage(("unknown option " + flag).c_str());
    } catch (const std::logic_error&) {
      usage(("bad value for " + flag + ": " + value).c_str());
    }
  }
  if (options.repeats < 1 || setup.min_n < 2 || setup.min_n > setup.max_n || setup.max_n > 40) usage("bad sizes");

  std::vector<Point> points;
  for (const std::string& w : workloads) {
    if (w == "singular") {
      for (unsigned n = setup.min_n; n <= setup.max_n; ++n)
        points.push_back({w, setup.singular_threads, std::uint64_t{1} << n, (std::uint64_t{2} << n) - 1});
    } else if (w == "scaling") {
      for (const std::uint64_t size : setup.scaling_sizes)
        for (const std::uint64_t threads : setup.scaling_threads) points.push_back({w, threads, size, size});
    } else {
      usage(("unknown workload " + w).c_str());
    }
  }
  for (const std::string& m : modes)
    if (m != "warpvm_aligned" && m != "warpvm_contiguous" && m != "cuda_malloc") usage(("unknown mode " + m).c_str());
  if (warpvm::device_count() == 0) {
    std::fprintf(stderr, "warpvm-alloc-bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  try {
    // CUDA's heap is fixed before any kernel runs: the largest point's total, within 40% of
    // the device, so that it and the warpvm cache fit together.
    if (std::find(modes.begin(), modes.end(), "cuda_malloc") != modes.end()) {
      std::uint64_t largest = 0;
      for (const Point& pt : points) largest = std::max(largest, pt.threads * pt.hi);
      std::size_t free_bytes = 0, total_bytes = 0;
      check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      const std::uint64_t fit = largest + largest / 4 + (64ull << 20);
      const std::uint64_t bytes = setup.cuda_heap_bytes != 0 ? setup.cuda_heap_bytes
                                                             : std::min<std::uint64_t>(fit, total_bytes / 10 * 4);
      check(cudaDeviceSetLimit(cudaLimitMallocHeapSize, bytes), "cudaDeviceSetLimit(cudaLimitMallocHeapSize)");
      setup.cuda_heap_bytes = bytes;
    }
    warpvm::Runtime rt(warpvm::Config{.cache_bytes = setup.cache_bytes, .max_pages_held_per_thread = 2});
    Recorder recorder(options);
    bool all_verified = true;
    for (const std::string& mode : modes) {
      std::optional<warpvm::Heap> heap;
      if (mode != "cuda_malloc")
        heap.emplace(rt, warpvm::HeapOptions{.capacity_bytes = setup.heap_bytes,
                                             .layout = mode == "warpvm_aligned" ? warpvm::HeapLayout::aligned
                                                                                : warpvm::HeapLayout::contiguous});
      for (const Point& pt : points) {
        Record r = heap ? measure_heap(rt, *heap, pt, options.repeats) : measure_cuda(rt.stream(), pt, options.repeats);
        r.workload = pt.workload;
        r.mode = mode;
        r.policy = mode == "cuda_malloc" ? "cuda_heap_" + std::to_string(setup.cuda_heap_bytes >> 20) + "MiB"
                                         : "heap_" + std::to_string(setup.heap_bytes >> 20) + "MiB";
        r.cache_fraction = 1;
        std::uint64_t requested = 0;  // of the first timed round (seed 2); the others are alike
        for (std::uint64_t t = 0; t < pt.threads; ++t) requested += point_bytes(2, t, pt.lo, pt.hi);
        r.dataset_bytes = r.useful_bytes = requested;
        r.extra["threads"] = static_cast<double>(pt.threads);
        r.extra["size_lo"] = static_cast<double>(pt.lo);
        r.extra["size_hi"] = static_cast<double>(pt.hi);
        all_verified = all_verified && r.verified;
        recorder.write(r);
      }
    }
    return all_verified ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-alloc-bench: %s\n", e.what());
    return 1;
  }
}
