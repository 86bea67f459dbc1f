#pragma once
/// @file
/// Every device allocation, pinned host allocation, host registration and host thread start of
/// the library goes through the calls below: one place that counts what is live (tests check
/// that a failure leaks nothing) and that a test can make fail (the Nth call of a kind), so that
/// every failure path can be taken on purpose. Host code. The hook costs one relaxed atomic load
/// per call while disarmed.

#include "warpvm/error.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace warpvm::detail {

/// What the library acquires through this header.
enum class Resource : std::uint8_t { device_memory, pinned_memory, host_registration, host_thread, count };
inline constexpr std::size_t resource_kinds = static_cast<std::size_t>(Resource::count);
const char* to_string(Resource kind) noexcept;

/// Test hook: the `nth` call of `kind` from now on (1: the next) fails as the real call fails
/// when the resource runs out (cudaErrorMemoryAllocation; std::system_error for a thread);
/// the calls after it succeed. 0 disarms. Calls are counted from the arming.
void fail_nth_call(Resource kind, std::uint32_t nth) noexcept;
/// Calls of `kind` since it was last armed (so that a test knows when `nth` passed them all).
[[nodiscard]] std::uint32_t calls_since_armed(Resource kind) noexcept;
/// Acquired and not yet given back: allocations and registrations (threads are not counted).
[[nodiscard]] std::int64_t live_count(Resource kind) noexcept;

/// Whether this call of `kind` is the one a test asked to fail (counts it when armed).
[[nodiscard]] bool injected_failure(Resource kind) noexcept;
/// Counts a `kind` acquired (+1) or given back (-1).
void count_live(Resource kind, int change) noexcept;

/// cudaMalloc, cudaHostAlloc, cudaHostRegister through the hook, and their releases.
[[nodiscard]] cudaError_t allocate_device(void** p, std::size_t bytes) noexcept;
[[nodiscard]] cudaError_t allocate_pinned(void** p, std::size_t bytes, unsigned flags) noexcept;
[[nodiscard]] cudaError_t register_host(void* p, std::size_t bytes, unsigned flags) noexcept;
void free_device(void* p) noexcept;
void free_pinned(void* p) noexcept;
void unregister_host(void* p) noexcept;

/// Starts a host thread running `body`; throws Error(out_of_memory) naming `what` when the
/// system cannot start one (std::thread's std::system_error), or when a test injects that.
template <class Body>
std::thread start_thread(Body&& body, const std::string& what) {
  try {
    if (injected_failure(Resource::host_thread))
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "injected by fail_nth_call");
    return std::thread(std::forward<Body>(body));
  } catch (const std::system_error& e) {
    throw_error(ErrorKind::out_of_memory, "could not start " + what + ": " + e.what(), __FILE__, __LINE__);
  }
}

}  // namespace warpvm::detail
