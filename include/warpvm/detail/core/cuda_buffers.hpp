#pragma once
// Owning, move-only wrappers for the CUDA memory, streams and events the runtime (and the
// benchmarks' and tests' own scratch) hold. Host code. Destructors never throw.

#include "warpvm/detail/core/resources.hpp"
#include "warpvm/error.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace warpvm::detail {

// Allocations and registrations are made and given back through resources.hpp.
struct DeviceFree {
  void operator()(void* p) const noexcept { free_device(p); }
};
struct PinnedFree {
  void operator()(void* p) const noexcept { free_pinned(p); }
};

struct HostUnregister {
  void operator()(void* p) const noexcept { unregister_host(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};

template <class T>
using device_ptr = std::unique_ptr<T, DeviceFree>;
template <class T>
using pinned_ptr = std::unique_ptr<T, PinnedFree>;
/// Caller memory registered with cudaHostRegister; unregistered when dropped.
using registration = std::unique_ptr<std::byte, HostUnregister>;
using stream_ptr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;
using event_ptr = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;

/// A stream of the current device that does not synchronise with the legacy default stream.
inline stream_ptr make_stream() {
  cudaStream_t created = nullptr;
  WARPVM_CUDA_TRY(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
  return stream_ptr(created);
}

/// An event of the current device for ordering and completion queries only (no timing).
inline event_ptr make_event() {
  cudaEvent_t created = nullptr;
  WARPVM_CUDA_TRY(cudaEventCreateWithFlags(&created, cudaEventDisableTiming));
  return event_ptr(created);
}

/// Makes config.device current for a scope and restores the caller's device after it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    WARPVM_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) WARPVM_CUDA_TRY(cudaSetDevice(device));
    switched_ = previous_ != device;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

/// Throws Error(kind, "<what> failed: <CUDA's reason>") when `status` is an error, clearing it.
inline void expect_success(cudaError_t status, ErrorKind kind, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  throw_error(kind, what + " failed: " + cudaGetErrorString(status), __FILE__, __LINE__);
}

/// Lets kernels on GPU `from` access memory of GPU `to` (a no-op when it already can). Throws
/// invalid_config, naming `who`, when the pair has no peer access.
inline void enable_peer_access(int from, int to, const std::string& who) {
  int can = 0;
  WARPVM_CUDA_TRY(cudaDeviceCanAccessPeer(&can, from, to));
  WARPVM_EXPECTS(can != 0, ErrorKind::invalid_config,
                 who + ": device " + std::to_string(from) + " has no peer access to device " + std::to_string(to));
  const DeviceGuard guard(from);
  const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
  else WARPVM_CUDA_TRY(status);
}

/// cudaMalloc of `count` T, not initialised. `what` names the buffer in the error message.
template <class T>
device_ptr<T> make_device(std::size_t count, const char* what) {
  void* p = nullptr;
  const std::size_t bytes = count * sizeof(T);
  expect_success(allocate_device(&p, bytes), ErrorKind::out_of_memory,
                 "cudaMalloc of " + std::to_string(bytes) + " B for " + what);
  return device_ptr<T>(static_cast<T*>(p));
}

/// cudaMalloc of `count` T, zero-filled. `what` names the buffer in the error message.
template <class T>
device_ptr<T> make_device_zeroed(std::size_t count, const char* what) {
  device_ptr<T> owned = make_device<T>(count, what);
  WARPVM_CUDA_TRY(cudaMemset(owned.get(), 0, count * sizeof(T)));
  return owned;
}

/// cudaHostAlloc of `count` T with `flags`, zero-filled. `what` names the buffer in the error message.
template <class T>
pinned_ptr<T> make_pinned_zeroed(std::size_t count, unsigned flags, const char* what) {
  void* p = nullptr;
  expect_success(allocate_pinned(&p, count * sizeof(T), flags), ErrorKind::out_of_memory,
                 "pinned allocation of " + std::to_string(count * sizeof(T)) + " B for " + what);
  std::memset(p, 0, count * sizeof(T));
  return pinned_ptr<T>(static_cast<T*>(p));
}

/// The device address of mapped pinned memory.
template <class T>
T* on_device(T* mapped) {
  void* device = nullptr;
  WARPVM_CUDA_TRY(cudaHostGetDevicePointer(&device, mapped, 0));
  return static_cast<T*>(device);
}

}  // namespace warpvm::detail
