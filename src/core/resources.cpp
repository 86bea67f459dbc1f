#include "warpvm/detail/core/resources.hpp"

#include <array>
#include <atomic>

namespace warpvm::detail {
namespace {

struct Injection {
  std::atomic<std::uint32_t> fail_at{0};  ///< 0: disarmed
  std::atomic<std::uint32_t> calls{0};
  std::atomic<std::int64_t> live{0};
};
std::array<Injection, resource_kinds> injections;

Injection& of(Resource kind) { return injections[static_cast<std::size_t>(kind)]; }

}  // namespace

const char* to_string(Resource kind) noexcept {
  switch (kind) {
    case Resource::device_memory: return "device_memory";
    case Resource::pinned_memory: return "pinned_memory";
    case Resource::host_registration: return "host_registration";
    case Resource::host_thread: return "host_thread";
    case Resource::count: break;
  }
  return "?";
}

void fail_nth_call(Resource kind, std::uint32_t nth) noexcept {
  of(kind).calls.store(0, std::memory_order_relaxed);
  of(kind).fail_at.store(nth, std::memory_order_relaxed);
}

std::uint32_t calls_since_armed(Resource kind) noexcept { return of(kind).calls.load(std::memory_order_relaxed); }

std::int64_t live_count(Resource kind) noexcept { return of(kind).live.load(std::memory_order_relaxed); }

bool injected_failure(Resource kind) noexcept {
  Injection& injection = of(kind);
  const std::uint32_t fail_at = injection.fail_at.load(std::memory_order_relaxed);
  if (fail_at == 0) return false;
  return injection.calls.fetch_add(1, std::memory_order_relaxed) + 1 == fail_at;
}

void count_live(Resource kind, int change) noexcept { of(kind).live.fetch_add(change, std::memory_order_relaxed); }

namespace {
/// The real call's status, or the injected failure's; a success is counted live.
template <class Call>
cudaError_t acquire(Resource kind, Call&& call) noexcept {
  if (injected_failure(kind)) return cudaErrorMemoryAllocation;
  const cudaError_t status = call();
  if (status == cudaSuccess) count_live(kind, +1);
  return status;
}
}  // namespace

cudaError_t allocate_device(void** p, std::size_t bytes) noexcept {
  return acquire(Resource::device_memory, [&] { return cudaMalloc(p, bytes); });
}
cudaError_t allocate_pinned(void** p, std::size_t bytes, unsigned flags) noexcept {
  return acquire(Resource::pinned_memory, [&] { return cudaHostAlloc(p, bytes, flags); });
}
cudaError_t register_host(void* p, std::size_t bytes, unsigned flags) noexcept {
  return acquire(Resource::host_registration, [&] { return cudaHostRegister(p, bytes, flags); });
}
void free_device(void* p) noexcept {
  if (p != nullptr && cudaFree(p) == cudaSuccess) count_live(Resource::device_memory, -1);
}
void free_pinned(void* p) noexcept {
  if (p != nullptr && cudaFreeHost(p) == cudaSuccess) count_live(Resource::pinned_memory, -1);
}
void unregister_host(void* p) noexcept {
  if (p != nullptr && cudaHostUnregister(p) == cudaSuccess) count_live(Resource::host_registration, -1);
}

}  // namespace warpvm::detail
