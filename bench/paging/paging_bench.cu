// warpvm-bench: the core paging micro-benchmarks (stream read, vector add, random page touch,
// sparse 8-byte reads, resident hit path) in every memory mode, each result verified, one JSON
// Lines record per point. Modes and record fields: docs/bench/paging.md.

#include "harness.cuh"
#include "uvm_counters.hpp"

#include "warpvm/workloads/patterns.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <memory>
#include <optional>
#include <sstream>

namespace warpvm::bench {
namespace {

constexpr unsigned block_threads = 256;

// Minimum resident blocks per SM for the warpvm kernels (CMake WARPVM_BENCH_MIN_BLOCKS; 0: no bound).
#if WARPVM_BENCH_MIN_BLOCKS > 0
#define WARPVM_BENCH_BOUNDS __launch_bounds__(256, WARPVM_BENCH_MIN_BLOCKS)
#else
#define WARPVM_BENCH_BOUNDS
#endif

__device__ void add_to_total(unsigned long long* total, unsigned long long value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0 && value != 0) atomicAdd(total, value);
}

__device__ __forceinline__ unsigned long long sum4(uint4 v) {
  return static_cast<unsigned long long>(v.x) + v.y + v.z + v.w;
}

// ---- kernels on plain pointers (device, pinned host, managed) ----

__global__ void sum_raw(const uint4* data, std::uint64_t vectors, unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vectors;
       i += std::uint64_t{gridDim.x} * blockDim.x)
    s += sum4(data[i]);
  add_to_total(total, s);
}

__global__ void vadd_raw(const uint4* a, const uint4* b, uint4* c, std::uint64_t vectors) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < vectors;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    c[i] = make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

using workloads::sparse_index;
using workloads::touched_page;

__global__ void touch_raw(const std::uint32_t* data, std::uint64_t pages, std::uint64_t touches,
                          std::uint64_t words_per_page, unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < touches;
       k += std::uint64_t{gridDim.x} * blockDim.x)
    s += data[touched_page(k, pages) * words_per_page + k % words_per_page];
  add_to_total(total, s);
}

__global__ void sparse_raw(const std::uint64_t* data, std::uint64_t n, std::uint64_t reads, unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < reads;
       k += std::uint64_t{gridDim.x} * blockDim.x)
    s += data[sparse_index(k, n)];
  add_to_total(total, s);
}

// ---- the same kernels through warpvm ----

/// A warp walks whole pages through page spans (the streaming fast path).
__global__ void WARPVM_BENCH_BOUNDS sum_pages(array<std::uint32_t> a, unsigned long long* total) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t per_page = a.elements_per_page();
  const std::uint64_t pages = (a.size() + per_page - 1) / per_page;
  unsigned long long s = 0;
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto page = a.span(p * per_page);
    const auto* vectors = reinterpret_cast<const uint4*>(page.data());
    for (std::uint32_t v = lane; v < page.size() / 4; v += 32) s += sum4(vectors[v]);
    for (std::uint32_t j = page.size() / 4 * 4 + lane; j < page.size(); j += 32) s += page[j];
  }
  add_to_total(total, s);
}

/// Grid-stride sum, `Ilp` accesses issued before any is used so that their latencies overlap:
/// the compiler does this by itself for raw loads (unrolling), but not across warpvm's page
/// checks, whose slow paths are branches; a tuned kernel writes it out.
template <unsigned Ilp, class Source>
__device__ unsigned long long sum_grid_stride(Source&& at, std::uint64_t n) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned long long s = 0;
  for (; i + (Ilp - 1) * stride < n; i += Ilp * stride) {
    std::uint32_t v[Ilp];
#pragma unroll
    for (unsigned k = 0; k < Ilp; ++k) v[k] = at(i + k * stride);
#pragma unroll
    for (unsigned k = 0; k < Ilp; ++k) s += v[k];
  }
  if constexpr (Ilp > 1)
    for (; i < n; i += stride) s += at(i);
  return s;
}

/// Each warp sums one contiguous chunk, lanes interleaved (coalesced): the pattern a cursor is
/// for; `Ilp` as in sum_grid_stride.
template <unsigned Ilp, class Source>
__device__ unsigned long long sum_warp_chunk(Source&& at, std::uint64_t n) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t chunk = (n + warps - 1) / warps;
  const std::uint64_t end = n < (warp + 1) * chunk ? n : (warp + 1) * chunk;
  std::uint64_t i = warp * chunk + threadIdx.x % 32;
  unsigned long long s = 0;
  for (; i + (Ilp - 1) * 32 < end; i += Ilp * 32) {
    std::uint32_t v[Ilp];
#pragma unroll
    for (unsigned k = 0; k < Ilp; ++k) v[k] = at(i + k * 32);
#pragma unroll
    for (unsigned k = 0; k < Ilp; ++k) s += v[k];
  }
  if constexpr (Ilp > 1)
    for (; i < end; i += 32) s += at(i);
  return s;
}

template <unsigned Ilp>
__global__ void sum_words_raw(const std::uint32_t* data, std::uint64_t n, unsigned long long* total) {
  add_to_total(total, sum_grid_stride<Ilp>([&](std::uint64_t i) { return data[i]; }, n));
}

template <unsigned Ilp>
__global__ void sum_chunks_raw(const std::uint32_t* data, std::uint64_t n, unsigned long long* total) {
  add_to_total(total, sum_warp_chunk<Ilp>([&](std::uint64_t i) { return data[i]; }, n));
}

template <unsigned Ilp>
__global__ void WARPVM_BENCH_BOUNDS sum_chunks_cursor(array<std::uint32_t> a, unsigned long long* total) {
  cursor<std::uint32_t> c(a);
  add_to_total(total, sum_warp_chunk<Ilp>([&](std::uint64_t i) { return c[i]; }, a.size()));
}

/// Element API: a[i] in a grid-stride loop.
template <unsigned Ilp>
__global__ void WARPVM_BENCH_BOUNDS sum_elements(array<std::uint32_t> a, unsigned long long* total) {
  add_to_total(total, sum_grid_stride<Ilp>([&](std::uint64_t i) { return a[i]; }, a.size()));
}

__global__ void WARPVM_BENCH_BOUNDS vadd_pages(array<std::uint32_t> a, array<std::uint32_t> b, array<std::uint32_t> c) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t per_page = a.elements_per_page();
  const std::uint64_t pages = (a.size() + per_page - 1) / per_page;
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto pa = a.span(p * per_page);
    const auto pb = b.span(p * per_page);
    const auto pc = c.span<access::overwrite>(p * per_page);
    const auto* va = reinterpret_cast<const uint4*>(pa.data());
    const auto* vb = reinterpret_cast<const uint4*>(pb.data());
    auto* vc = reinterpret_cast<uint4*>(pc.data());
    for (std::uint32_t v = lane; v < pa.size() / 4; v += 32) {
      const uint4 x = va[v], y = vb[v];
      vc[v] = make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
  }
}

__global__ void WARPVM_BENCH_BOUNDS touch_pages(array<std::uint32_t> a, std::uint64_t pages, std::uint64_t touches, unsigned long long* total) {
  const std::uint64_t per_page = a.elements_per_page();
  unsigned long long s = 0;
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < touches;
       k += std::uint64_t{gridDim.x} * blockDim.x)
    s += a[touched_page(k, pages) * per_page + k % per_page];
  add_to_total(total, s);
}

__global__ void WARPVM_BENCH_BOUNDS sparse_elements(array<std::uint64_t> a, std::uint64_t reads, unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < reads;
       k += std::uint64_t{gridDim.x} * blockDim.x)
    s += a[sparse_index(k, a.size())];
  add_to_total(total, s);
}

// ---- harness ----

struct DeviceCounter {
  unsigned long long* value = nullptr;
  DeviceCounter() { check(cudaMalloc(&value, sizeof *value), "cudaMalloc counter"); }
  ~DeviceCounter() { cudaFree(value); }
  void zero(cudaStream_t s) const { check(cudaMemsetAsync(value, 0, sizeof *value, s), "memset counter"); }
  unsigned long long read() const {
    unsigned long long v = 0;
    check(cudaMemcpy(&v, value, sizeof v, cudaMemcpyDeviceToHost), "read counter");
    return v;
  }
};

class Bench {
 public:
  explicit Bench(const Options& o) : o_(o), recorder_(o) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0), "SM count");
    // CUPTI counts UVM traffic only for managed memory allocated after its counters were first
    // enabled (seen on the H200: a run on older memory counted nothing), so arm them now.
    if (o_.wants_mode("uvm") || o_.wants_mode("uvm_prefetch")) UvmCounters().stop();
    if (!o_.events.empty()) {
      events_.open(o_.events);
      if (!events_) throw std::runtime_error("cannot write " + o_.events);
      write_fault_event_header(events_);
    }
    if (!o_.trace.empty()) {
      trace_.open(o_.trace);
      if (!trace_) throw std::runtime_error("cannot write " + o_.trace);
      write_batch_trace_header(trace_);
    }
  }

  void run() {
    if (o_.wants("stream")) stream_read();
    if (o_.wants("vadd")) vector_add();
    if (o_.wants("random_page")) random_page();
    if (o_.wants("sparse_read")) sparse_read();
    if (o_.wants("resident")) resident();
  }

 private:
  dim3 grid(unsigned blocks_per_sm = 4) const { return dim3(sms_ * blocks_per_sm); }
  /// As grid(), capped so that the launch passes the runtime's progress bound.
  dim3 grid(const Runtime& rt, unsigned blocks_per_sm = 4) const {
    const std::uint64_t fitting = rt.max_resident_threads() / block_threads;
    return dim3(static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(sms_ * blocks_per_sm, fitting))));
  }

  Config warpvm_config(std::uint64_t footprint, double fraction, std::uint32_t holds) const {
    const std::uint64_t cache = std::max<std::uint64_t>(4096, static_cast<std::uint64_t>(footprint * fraction) / 4096 * 4096);
    return Config{.cache_bytes = cache,
                  .eviction = o_.eviction,
                  .fault_event_capacity = event_capacity(footprint),
                  .max_pages_held_per_thread = holds,
                  .automatic_remote_share = o_.automatic_remote_share,
                  .automatic_remote_share_evicting = o_.automatic_remote_share_evicting};
  }
  /// Room for every page faulting, waited for and evicted a few times over, per run.
  std::size_t event_capacity(std::uint64_t footprint) const {
    return o_.fault_events ? std::min<std::uint64_t>(std::uint64_t{1} << 28, footprint / 4096 * 4 + 4096) : 0;
  }

  Record base(const char* workload, const char* mode, std::uint64_t dataset, std::uint64_t useful) const {
    Record r;
    r.workload = workload;
    r.mode = mode;
    r.dataset_bytes = dataset;
    r.useful_bytes = useful;
    return r;
  }

  /// measure() for real UVM, then its traffic from --uvm-counted-runs more runs (add_uvm_traffic).
  Record measure_uvm(Record r, const std::function<void()>& before, const std::function<void()>& run,
                     const std::function<bool()>& verify) {
    r = measure(std::move(r), before, run, verify);
    add_uvm_traffic(r, before, run, o_.uvm_counted_runs);
    return r;
  }

  /// The uvm preset (host_batched transport) with a cache of whole 2 MB chunks for each object,
  /// once per batch size and prefetch setting asked for.
  std::vector<Config> uvm_configs(std::initializer_list<std::uint64_t> object_bytes, double fraction) const {
    Config config = uvm_preset_config(object_bytes, fraction);
    config.fault_event_capacity = event_capacity(config.cache_bytes);
    std::vector<Config> configs;
    for (const unsigned batch : o_.uvm_batch_sizes) {
      for (const bool prefetch : o_.uvm_prefetch) {
        config.fault_batch_size = batch;
        config.prefetch = prefetch;
        configs.push_back(config);
      }
    }
    return configs;
  }

  /// A workload's warpvm points: modes warpvm and warpvm_auto (Placement::automatic) at each
  /// cache fraction, then warpvm_uvm (the uvm preset) in each variant asked for. `footprint` bytes in all, `holds` pages per thread.
  struct PagedRun {
    Config config;
    double cache_fraction;
    const char* mode;
    Placement placement = Placement::migrate;  ///< of the workload's objects
    [[nodiscard]] bool uvm_preset() const { return config.transport == Transport::host_batched; }
  };
  std::vector<PagedRun> paged_runs(std::uint64_t footprint, std::uint32_t holds,
                                   std::initializer_list<std::uint64_t> object_bytes) const {
    std::vector<PagedRun> runs;
    if (o_.wants_mode("warpvm"))
      for (const double fraction : o_.cache_fractions)
        runs.push_back({warpvm_config(footprint, fraction, holds), fraction, "warpvm"});
    if (o_.wants_mode("warpvm_auto"))
      for (const double fraction : o_.cache_fractions)
        runs.push_back({warpvm_config(footprint, fraction, holds), fraction, "warpvm_auto", Placement::automatic});
    // The uvm preset below a cache of every object's chunks evicts, in builds with the evicting path.
    if (o_.wants_mode("warpvm_uvm"))
      for (const double fraction : o_.cache_fractions)
        if (fraction >= 1.0 || WARPVM_HOST_BATCHED_EVICTION)
          for (const Config& config : uvm_configs(object_bytes, fraction)) runs.push_back({config, fraction, "warpvm_uvm"});
    return runs;
  }

  /// Times one paged run (warpvm_point; for the uvm preset also its fault batches).
  template <class Launch>
  Record paged_point(Record r, Runtime& rt, const PagedRun& run, Launch&& launch, const std::function<bool()>& verify) {
    r = warpvm_point(std::move(r), rt, run.cache_fraction, launch, verify);
    if (run.uvm_preset()) {
      r.policy = uvm_policy(rt.config());
      add_batch_summary(r, rt, [&] { rt.drop_cached(); }, [&] { launch(); }, trace_);
    }
    return r;
  }

  /// The last run's fault events: their count into the record, the events into --events.
  void record_events(Record& r, const Runtime& rt) {
    std::uint64_t dropped = 0;
    const std::vector<FaultEvent> events = rt.fault_events(&dropped);
    r.extra["fault_events"] = static_cast<double>(events.size());
    r.extra["fault_events_dropped"] = static_cast<double>(dropped);
    if (events_.is_open()) {
      std::ostringstream run;
      run << r.workload << '/' << r.mode << '/' << r.cache_fraction;
      write_fault_event_rows(events_, run.str(), events);
    }
  }

  /// Times `run` on the benchmark's stream (`before` untimed ahead of each run), then verifies.
  Record measure(Record r, const std::function<void()>& before, const std::function<void()>& run,
                 const std::function<bool()>& verify) const {
    r.seconds = time_runs(stream_, o_.repeats, before, run);
    r.verified = verify();
    return r;
  }

  /// Times a warpvm run: cache dropped before every run so each starts from host memory (cold),
  /// or warmed once so that runs measure the hit path. Returns the verified record.
  template <class Launch>
  Record warpvm_point(Record r, Runtime& rt, double fraction, Launch&& launch, const std::function<bool()>& verify,
                      bool cold = true) {
    r.policy = to_string(o_.eviction);
    r.cache_fraction = fraction;
    if (r.mode == "warpvm_auto") {
      r.extra["automatic_remote_share"] = rt.config().automatic_remote_share;
      r.extra["automatic_remote_share_evicting"] = rt.config().automatic_remote_share_evicting;
    }
    if (!cold) launch();  // warm the cache once; runs then measure the hit path
    rt.reset_stats();
    const bool events = rt.config().fault_event_capacity != 0;
    std::function<void()> before;  // untimed, ahead of every run: start cold, with an empty event log
    if (cold || events)
      before = [&] {
        if (cold) rt.drop_cached();
        if (events) rt.clear_fault_events();
      };
    r.seconds = time_runs(rt.stream(), o_.repeats, before, [&] { launch(); });
    rt.synchronize();
    if (events) record_events(r, rt);
    add_paging_stats(r, rt, o_.repeats + 1);  // the warm-up run counts too
    r.verified = verify();
    return r;
  }

  void stream_read() {
    const std::uint64_t n = o_.dataset_bytes / 4;
    PinnedArray host(n * 4);
    fill_random(host.as<std::uint32_t>(), n, 1);
    const std::uint64_t expected = host_sum(host.as<std::uint32_t>(), n);
    DeviceCounter total;
    auto verify = [&] { return total.read() == expected; };
    const std::uint64_t vectors = n / 4;
    auto raw = [&](const void* p) {
      total.zero(stream_);
      sum_raw<<<grid(), block_threads, 0, stream_>>>(static_cast<const uint4*>(p), vectors, total.value);
    };
    if (o_.wants_mode("explicit")) {
      DeviceBuffer<std::uint32_t> dev(n);
      Record r = base("stream", "explicit", n * 4, n * 4);
      r.bytes_moved = n * 4;
      recorder_.write(measure(r, nullptr, [&] {
        check(cudaMemcpyAsync(dev.data, host.as<void>(), n * 4, cudaMemcpyHostToDevice, stream_), "copy");
        raw(dev.data);
      }, verify));
    }
    if (o_.wants_mode("zero_copy"))
      recorder_.write(measure(base("stream", "zero_copy", n * 4, n * 4), nullptr, [&] { raw(host.as<void>()); }, verify));
    for (const char* mode : {"uvm", "uvm_prefetch"}) {
      if (!o_.wants_mode(mode)) continue;
      const bool prefetch = std::string(mode) == "uvm_prefetch";
      Managed m(host.as<void>(), n * 4);
      recorder_.write(measure_uvm(base("stream", mode, n * 4, n * 4), [&] { m.to_host(); }, [&] {
        if (prefetch) m.to_device(stream_);
        raw(m.as<void>());
      }, verify));
    }
    for (const PagedRun& run : paged_runs(n * 4, 1, {n * 4})) {
      Runtime rt(run.config);
      auto a = rt.adopt(host.as<std::uint32_t>(), n, run.placement, "stream");
      recorder_.write(paged_point(base("stream", run.mode, n * 4, n * 4), rt, run, [&] {
        total.zero(rt.stream());
        rt.launch(sum_pages, grid(rt), dim3(block_threads), 0, a.device(), total.value);
      }, verify));
    }
  }

  void vector_add() {
    const std::uint64_t n = o_.dataset_bytes / 12;  // A, B and C together make the dataset
    const std::uint64_t n4 = n / 4 * 4, bytes = n4 * 4;
    PinnedArray a(bytes), b(bytes), c(bytes);
    fill_random(a.as<std::uint32_t>(), n4, 2);
    fill_random(b.as<std::uint32_t>(), n4, 3);
    auto poison = [&] { std::memset(c.as<void>(), 0xAB, bytes); };
    auto verify_on = [&](const std::uint32_t* out) {
      std::atomic<std::uint64_t> wrong{0};
      const auto* x = a.as<std::uint32_t>();
      const auto* y = b.as<std::uint32_t>();
      parallel_for(n4, [&](std::uint64_t lo, std::uint64_t hi) {
        std::uint64_t w = 0;
        for (std::uint64_t i = lo; i < hi; ++i) w += out[i] != x[i] + y[i];
        wrong += w;
      });
      return wrong == 0;
    };
    const std::uint64_t useful = 3 * bytes, vectors = n4 / 4;
    if (o_.wants_mode("explicit")) {
      DeviceBuffer<uint4> da(vectors), db(vectors), dc(vectors);
      Record r = base("vadd", "explicit", 3 * bytes, useful);
      r.bytes_moved = 3 * bytes;
      poison();
      recorder_.write(measure(r, nullptr, [&] {
        check(cudaMemcpyAsync(da.data, a.as<void>(), bytes, cudaMemcpyHostToDevice, stream_), "copy a");
        check(cudaMemcpyAsync(db.data, b.as<void>(), bytes, cudaMemcpyHostToDevice, stream_), "copy b");
        vadd_raw<<<grid(), block_threads, 0, stream_>>>(da.data, db.data, dc.data, vectors);
        check(cudaMemcpyAsync(c.as<void>(), dc.data, bytes, cudaMemcpyDeviceToHost, stream_), "copy c");
      }, [&] { return verify_on(c.as<std::uint32_t>()); }));
    }
    if (o_.wants_mode("zero_copy")) {
      poison();
      recorder_.write(measure(base("vadd", "zero_copy", 3 * bytes, useful), nullptr, [&] {
        vadd_raw<<<grid(), block_threads, 0, stream_>>>(a.as<uint4>(), b.as<uint4>(), c.as<uint4>(), vectors);
      }, [&] { return verify_on(c.as<std::uint32_t>()); }));
    }
    for (const char* mode : {"uvm", "uvm_prefetch"}) {
      if (!o_.wants_mode(mode)) continue;
      const bool prefetch = std::string(mode) == "uvm_prefetch";
      Managed ma(a.as<void>(), bytes), mb(b.as<void>(), bytes), mc(c.as<void>(), bytes);
      Record r = base("vadd", mode, 3 * bytes, useful);
      r.extra["result_on_host"] = 0;
      recorder_.write(measure_uvm(r, [&] { ma.to_host(); mb.to_host(); mc.to_host(); }, [&] {
        if (prefetch) { ma.to_device(stream_); mb.to_device(stream_); mc.to_device(stream_); }
        vadd_raw<<<grid(), block_threads, 0, stream_>>>(ma.as<uint4>(), mb.as<uint4>(),
                                                        mc.as<uint4>(), vectors);
      }, [&] {
        check(cudaDeviceSynchronize(), "uvm vadd");
        return verify_on(mc.as<std::uint32_t>());
      }));
    }
    for (const PagedRun& run : paged_runs(3 * bytes, 3, {bytes, bytes, bytes})) {
      Runtime rt(run.config);
      auto oa = rt.adopt(a.as<std::uint32_t>(), n4, run.placement, "A");
      auto ob = rt.adopt(b.as<std::uint32_t>(), n4, run.placement, "B");
      auto oc = rt.adopt(c.as<std::uint32_t>(), n4, run.placement, "C");
      auto kernel = [&] {
        rt.launch(vadd_pages, grid(rt), dim3(block_threads), 0, oa.device(), ob.device(), oc.device());
      };
      poison();
      Record r = base("vadd", run.mode, 3 * bytes, useful);
      r.extra["result_on_host"] = 1;
      // The kernel alone (C left in the cache, as UVM leaves it on the GPU), timed once.
      if (!run.uvm_preset()) r.extra["kernel_s"] = median(time_runs(rt.stream(), 1, [&] { rt.drop_cached(); }, kernel));
      recorder_.write(paged_point(r, rt, run, [&] {
        kernel();
        rt.flush();  // C is on the host when the clock stops
      }, [&] { return verify_on(c.as<std::uint32_t>()); }));
    }
  }

  void random_page() {
    const std::uint64_t n = o_.dataset_bytes / 4, pages = n / 1024;
    const std::uint64_t touches = std::min<std::uint64_t>(pages / 2, 2u << 20);
    PinnedArray host(n * 4);
    fill_random(host.as<std::uint32_t>(), n, 4);
    std::uint64_t expected = 0;
    for (std::uint64_t k = 0; k < touches; ++k) expected += host.as<std::uint32_t>()[touched_page(k, pages) * 1024 + k % 1024];
    DeviceCounter total;
    auto verify = [&] { return total.read() == expected; };
    auto raw = [&](const void* p) {
      total.zero(stream_);
      touch_raw<<<grid(), block_threads, 0, stream_>>>(static_cast<const std::uint32_t*>(p), pages, touches, 1024, total.value);
    };
    auto finish = [&](Record r) {
      r.extra["pages_per_s"] = touches / median(r.seconds);
      r.extra["touches"] = static_cast<double>(touches);
      recorder_.write(r);
    };
    const std::uint64_t useful = touches * 4096;  // a touch needs its page
    if (o_.wants_mode("zero_copy"))
      finish(measure(base("random_page", "zero_copy", n * 4, useful), nullptr, [&] { raw(host.as<void>()); }, verify));
    if (o_.wants_mode("uvm")) {
      Managed m(host.as<void>(), n * 4);
      finish(measure_uvm(base("random_page", "uvm", n * 4, useful), [&] { m.to_host(); }, [&] { raw(m.as<void>()); }, verify));
    }
    for (const PagedRun& run : paged_runs(n * 4, 1, {n * 4})) {
      Runtime rt(run.config);
      auto a = rt.adopt(host.as<std::uint32_t>(), n, run.placement, "pages");
      finish(paged_point(base("random_page", run.mode, n * 4, useful), rt, run, [&] {
        total.zero(rt.stream());
        rt.launch(touch_pages, grid(rt), dim3(block_threads), 0, a.device(), pages, touches, total.value);
      }, verify));
    }
  }

  void sparse_read() {
    const std::uint64_t n = o_.dataset_bytes / 8;
    const std::uint64_t reads = 1u << 20;
    PinnedArray host(n * 8);
    fill_random(host.as<std::uint32_t>(), n * 2, 5);
    std::uint64_t expected = 0;
    for (std::uint64_t k = 0; k < reads; ++k) expected += host.as<std::uint64_t>()[sparse_index(k, n)];
    DeviceCounter total;
    auto verify = [&] { return total.read() == expected; };
    auto raw = [&](const void* p) {
      total.zero(stream_);
      sparse_raw<<<grid(), block_threads, 0, stream_>>>(static_cast<const std::uint64_t*>(p), n, reads, total.value);
    };
    const std::uint64_t useful = reads * 8;
    auto finish = [&](Record r) {
      r.extra["reads"] = static_cast<double>(reads);
      r.extra["reads_per_s"] = reads / median(r.seconds);
      recorder_.write(r);
    };
    if (o_.wants_mode("zero_copy"))
      finish(measure(base("sparse_read", "zero_copy", n * 8, useful), nullptr, [&] { raw(host.as<void>()); }, verify));
    if (o_.wants_mode("device")) {
      DeviceBuffer<std::uint64_t> dev(n);
      check(cudaMemcpy(dev.data, host.as<void>(), n * 8, cudaMemcpyHostToDevice), "copy");
      finish(measure(base("sparse_read", "device", n * 8, useful), nullptr, [&] { raw(dev.data); }, verify));
    }
    if (o_.wants_mode("uvm")) {
      Managed m(host.as<void>(), n * 8);
      finish(measure_uvm(base("sparse_read", "uvm", n * 8, useful), [&] { m.to_host(); }, [&] { raw(m.as<void>()); }, verify));
    }
    for (const auto& [mode, placement] : {std::pair{"warpvm_remote", Placement::remote}, std::pair{"warpvm", Placement::migrate},
                                         std::pair{"warpvm_auto", Placement::automatic}}) {
      if (!o_.wants_mode(mode)) continue;
      const bool remote = placement == Placement::remote;
      Runtime rt(warpvm_config(n * 8, 1.0, 1));
      auto a = rt.adopt(host.as<std::uint64_t>(), n, placement, "sparse");
      finish(warpvm_point(base("sparse_read", mode, n * 8, useful), rt, remote ? 0.0 : 1.0, [&] {
        total.zero(rt.stream());
        rt.launch(sparse_elements, grid(rt), dim3(block_threads), 0, a.device(), reads, total.value);
      }, verify));
    }
  }

  /// Everything resident: warpvm's hit path against the same kernel on a raw device pointer.
  void resident() {
    const std::uint64_t bytes = std::min<std::uint64_t>(o_.dataset_bytes, 8ull << 30);
    const std::uint64_t n = bytes / 4;
    PinnedArray host(bytes);
    fill_random(host.as<std::uint32_t>(), n, 6);
    const std::uint64_t expected = host_sum(host.as<std::uint32_t>(), n);
    DeviceCounter total;
    auto verify = [&] { return total.read() == expected; };
    if (o_.wants_mode("device")) {
      DeviceBuffer<uint4> dev(bytes / sizeof(uint4));
      check(cudaMemcpy(dev.data, host.as<void>(), bytes, cudaMemcpyHostToDevice), "copy");
      const auto* words = reinterpret_cast<const std::uint32_t*>(dev.data);
      // The access patterns of the span, element and cursor kernels, on a raw device pointer.
      const std::pair<const char*, std::function<void()>> patterns[] = {
          {"device_vector", [&] { sum_raw<<<grid(8), block_threads, 0, stream_>>>(dev.data, n / 4, total.value); }},
          {"device_element", [&] { sum_words_raw<1><<<grid(8), block_threads, 0, stream_>>>(words, n, total.value); }},
          {"device_element_ilp4", [&] { sum_words_raw<4><<<grid(8), block_threads, 0, stream_>>>(words, n, total.value); }},
          {"device_chunked", [&] { sum_chunks_raw<1><<<grid(8), block_threads, 0, stream_>>>(words, n, total.value); }},
          {"device_chunked_ilp4", [&] { sum_chunks_raw<4><<<grid(8), block_threads, 0, stream_>>>(words, n, total.value); }}};
      for (const auto& [mode, launch] : patterns) {
        recorder_.write(measure(base("resident", mode, bytes, bytes), nullptr, [&] {
          total.zero(stream_);
          launch();
        }, verify));
      }
    }
    if (!o_.wants_mode("warpvm")) return;
    Runtime rt(warpvm_config(bytes, 1.0, 1));
    auto a = rt.adopt(host.as<std::uint32_t>(), n, Placement::migrate, "resident");
    // First with every migrate object fitting in the cache (resident pages read without holds),
    // then with one more object registered so that eviction is possible and every access holds.
    std::optional<object<std::uint32_t>> extra;
    for (const bool add_extra : {false, true}) {
      if (add_extra) extra.emplace(rt.alloc<std::uint32_t>(1024, Placement::migrate, "extra"));
      const bool evictable = extra.has_value();
      using SumKernel = void (*)(array<std::uint32_t>, unsigned long long*);
      const std::pair<const char*, SumKernel> apis[] = {
          {"warpvm_span", sum_pages},
          {"warpvm_element", sum_elements<1>},
          {"warpvm_element_ilp4", sum_elements<4>},
          {"warpvm_cursor", sum_chunks_cursor<1>},
          {"warpvm_cursor_ilp4", sum_chunks_cursor<4>}};
      for (const auto& [mode, kernel] : apis) {
        Record r = base("resident", (std::string(mode) + (evictable ? "_evictable" : "")).c_str(), bytes, bytes);
        r.extra["eviction_possible"] = evictable;
        recorder_.write(warpvm_point(r, rt, 1.0, [&] {
          total.zero(rt.stream());
          rt.launch(kernel, grid(rt, 8), dim3(block_threads), 0, a.device(), total.value);
        }, verify, /*cold=*/false));
      }
    }
  }

  const Options& o_;
  Recorder recorder_;
  std::ofstream trace_;
  std::ofstream events_;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
};

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  const auto options = warpvm::bench::parse_options(argc, argv);
  return warpvm::bench::bench_main("warpvm-bench", " (use `warpvm sim` for the simulator)",
                                   [&] { warpvm::bench::Bench(options).run(); });
}
