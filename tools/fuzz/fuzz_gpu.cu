#include "fuzz_gpu.hpp"

#include "warpvm/detail/core/inspect.hpp"
#include "warpvm/warpvm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace warpvm::fuzz {
namespace {

/// The kernel's handles, by fuzz object index (fuzz_program.hpp's element types).
struct DeviceObjects {
  array<std::uint8_t> bytes;
  array<std::uint16_t> halves;
  array<std::uint32_t> words;
  array<std::uint64_t> doubles;
  array<Pair> pairs;
  array<std::uint32_t> counters32;
  array<std::uint64_t> counters64;

  template <class T>
  [[nodiscard]] __device__ const array<T>& get(std::uint32_t o) const {
    if constexpr (std::is_same_v<T, std::uint8_t>) return bytes;
    else if constexpr (std::is_same_v<T, std::uint16_t>) return halves;
    else if constexpr (std::is_same_v<T, std::uint32_t>) return o == 2 ? words : counters32;
    else if constexpr (std::is_same_v<T, std::uint64_t>) return o == 3 ? doubles : counters64;
    else return pairs;
  }
};

/// One GPU thread's accesses: the library's own access paths. Each is out of line, so that the
/// fault path is compiled once per element type and access rather than at every call site of
/// the interpreter (which multiplies them by its nesting levels and kept ptxas busy for minutes).
class DeviceExecutor {
 public:
  __device__ explicit DeviceExecutor(const DeviceObjects& objects) : objects_(objects) {}

  template <class T>
  __device__ __noinline__ T load(std::uint32_t o, std::uint64_t i) {
    return objects_.get<T>(o)[i];
  }
  template <class T>
  __device__ __noinline__ void store(std::uint32_t o, std::uint64_t i, T v) {
    objects_.get<T>(o).store(i, v);
  }
  template <class T>
  __device__ __noinline__ T fetch_add(std::uint32_t o, std::uint64_t i, T v) {
    return objects_.get<T>(o).fetch_add(i, v);
  }
  template <class T>
  __device__ __noinline__ T fetch_sub(std::uint32_t o, std::uint64_t i, T v) {
    return objects_.get<T>(o).fetch_sub(i, v);
  }
  template <class T>
  __device__ __noinline__ T fetch_min(std::uint32_t o, std::uint64_t i, T v) {
    return objects_.get<T>(o).fetch_min(i, v);
  }
  template <class T>
  __device__ __noinline__ T fetch_max(std::uint32_t o, std::uint64_t i, T v) {
    return objects_.get<T>(o).fetch_max(i, v);
  }
  template <class T>
  __device__ __noinline__ T exchange(std::uint32_t o, std::uint64_t i, T v) {
    return objects_.get<T>(o).exchange(i, v);
  }
  template <class T>
  __device__ __noinline__ bool compare_exchange(std::uint32_t o, std::uint64_t i, T& expected, T desired) {
    return objects_.get<T>(o).compare_exchange(i, expected, desired);
  }
  template <class T, access A, class F>
  __device__ void with_span(std::uint32_t o, std::uint64_t i, F&& f) {
    page_span<T, A> s = open_span<T, A>(o, i);
    f(s);
  }
  template <class T, access A, class F>
  __device__ void with_cursor(std::uint32_t o, F&& f) {
    cursor<T, A> c(objects_.get<T>(o));
    f(c);
  }
  /// All 32 lanes of the warp together: each writes every 32nd element of the page.
  template <class T, class ValueOf>
  __device__ void overwrite(std::uint32_t o, std::uint64_t page, std::uint32_t lane, ValueOf&& value_of) {
    __syncwarp();
    page_span<T, access::overwrite> s = open_span<T, access::overwrite>(o, page * objects_.get<T>(o).elements_per_page());
    for (std::uint32_t j = lane; j < s.size(); j += warp_size) s[j] = value_of(s.first() + j);
    __syncwarp();  // the lanes let go of the page together (the overwrite contract)
  }

 private:
  /// The span's acquisition (its release stays inline, in the destructor: a match and an atomic).
  template <class T, access A>
  __device__ __noinline__ page_span<T, A> open_span(std::uint32_t o, std::uint64_t i) {
    return objects_.get<T>(o).template span<A>(i);
  }

  const DeviceObjects& objects_;
};

__global__ void fuzz_kernel(DeviceObjects objects, Program program, std::uint64_t* digests) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  DeviceExecutor x(objects);
  digests[t] = run_thread(program, t, x);
}

/// Device memory for the digests, freed on scope exit.
class DigestBuffer {
 public:
  explicit DigestBuffer(std::size_t count) : count_(count) {
    WARPVM_CUDA_TRY(cudaMalloc(&data_, count * sizeof(std::uint64_t)));
  }
  ~DigestBuffer() { cudaFree(data_); }
  DigestBuffer(const DigestBuffer&) = delete;
  DigestBuffer& operator=(const DigestBuffer&) = delete;
  [[nodiscard]] std::uint64_t* get() const { return data_; }
  [[nodiscard]] std::vector<std::uint64_t> to_host() const {
    std::vector<std::uint64_t> out(count_);
    WARPVM_CUDA_TRY(cudaMemcpy(out.data(), data_, count_ * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  std::uint64_t* data_ = nullptr;
  std::size_t count_;
};

Config runtime_config(const RunConfig& run) {
  Config c;
  c.cache_bytes = std::size_t{run.frames} * run.shape.page_bytes;
  c.resident_bytes = run.resident_bytes;
  c.page_bytes = run.shape.page_bytes;
  c.eviction = run.shape.eviction;
  c.checked = run.checked;
  c.max_pages_held_per_thread = run.holds;
  // A hang is a failure to report, not something to wait 20 s for.
  c.watchdog_seconds = 5.0;
  return c;
}

class GpuBackend final : public Backend {
 public:
  GpuBackend(const RunConfig& config, const ReferenceModel& model)
      : config_(config), runtime_(runtime_config(config)), digests_(config.threads) {
    std::apply([&](auto&... object) { (allocate(object), ...); }, objects_);
    for (std::uint32_t o = 0; o < object_count; ++o) {
      const std::span<std::byte> host = this->host(o);
      std::memcpy(host.data(), model.bytes(o).data(), host.size());
    }
  }

  bool set_placement(std::uint32_t o, Placement placement) override {
    try {
      on_object(o, [&](auto& object) { object.set_placement(placement); });
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::out_of_memory && placement == Placement::resident) return false;
      throw;
    }
    return true;
  }
  std::vector<std::uint64_t> launch(const Program& program) override {
    const auto& [bytes, halves, words, doubles, pairs, counters32, counters64] = objects_;
    const DeviceObjects handles{bytes.device(),  halves.device(),     words.device(),     doubles.device(),
                                pairs.device(), counters32.device(), counters64.device()};
    runtime_.launch(fuzz_kernel, dim3(config_.threads / config_.block), dim3(config_.block), 0, handles, program,
                    digests_.get());
    runtime_.synchronize();
    return digests_.to_host();
  }
  CacheSnapshot snapshot() override {
    CacheSnapshot s;
    s.cache_frames = runtime_.frame_count();
    s.owners = detail::frame_owners(runtime_);
    s.dirty = detail::frame_dirty_bits(runtime_);
    for (std::uint32_t o = 0; o < object_count; ++o)
      on_object(o, [&](auto& object) {
        s.objects.push_back({object.id(), object.placement(), detail::page_states(runtime_, object.id()), host(o)});
      });
    return s;
  }
  void flush() override { runtime_.flush(); }
  void drop_cached() override { runtime_.drop_cached(); }
  std::span<std::byte> host(std::uint32_t o) override {
    std::span<std::byte> bytes;
    on_object(o, [&](auto& object) { bytes = std::as_writable_bytes(object.host()); });
    return bytes;
  }
  std::uint64_t bytes_moved() override { return runtime_.stats().bytes_moved(); }
  std::uint64_t pages_in() override { return runtime_.stats().misses; }

 private:
  using Objects = std::tuple<object<std::uint8_t>, object<std::uint16_t>, object<std::uint32_t>, object<std::uint64_t>,
                             object<Pair>, object<std::uint32_t>, object<std::uint64_t>>;

  template <class T>
  void allocate(object<T>& o) {
    const auto index = static_cast<std::uint32_t>(next_allocation_++);
    o = runtime_.alloc<T>(config_.elements[index], config_.placements[0][index], "fuzz" + std::to_string(index));
  }
  /// f(object o) for a fuzz object index.
  template <class F>
  void on_object(std::uint32_t o, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((o == I ? f(std::get<I>(objects_)) : void()), ...);
    }(std::make_index_sequence<object_count>{});
  }

  const RunConfig& config_;
  Runtime runtime_;
  Objects objects_;
  std::size_t next_allocation_ = 0;
  DigestBuffer digests_;
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(const RunConfig& config, const ReferenceModel& model) {
  return std::make_unique<GpuBackend>(config, model);
}

std::string gpu_name() {
  if (device_count() == 0) return "";
  cudaDeviceProp properties{};
  WARPVM_CUDA_TRY(cudaGetDeviceProperties(&properties, 0));
  return properties.name;
}

double measure_link_gbps() {
  constexpr std::size_t bytes = std::size_t{256} << 20;
  void* host = nullptr;
  void* device = nullptr;
  WARPVM_CUDA_TRY(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
  double best = 0;
  try {
    WARPVM_CUDA_TRY(cudaMalloc(&device, bytes));
    std::memset(host, 1, bytes);
    for (int repeat = 0; repeat < 4; ++repeat) {
      const auto started = std::chrono::steady_clock::now();
      WARPVM_CUDA_TRY(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
    }
  } catch (...) {
    cudaFree(device);
    cudaFreeHost(host);
    throw;
  }
  WARPVM_CUDA_TRY(cudaFree(device));
  WARPVM_CUDA_TRY(cudaFreeHost(host));
  return best;
}

}  // namespace warpvm::fuzz
