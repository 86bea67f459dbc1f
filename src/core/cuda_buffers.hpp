#pragma once
// Owning, move-only wrappers for the CUDA memory the runtime holds. Destructors never throw.

#include "warpvm/error.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

namespace warpvm::detail {

struct DeviceFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};

template <class T>
using device_ptr = std::unique_ptr<T, DeviceFree>;
template <class T>
using pinned_ptr = std::unique_ptr<T, PinnedFree>;

/// cudaMalloc of `count` T, zero-filled. `what` names the buffer in the error message.
template <class T>
device_ptr<T> make_device_zeroed(std::size_t count, const char* what) {
  void* p = nullptr;
  const std::size_t bytes = count * sizeof(T);
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw_error(ErrorKind::out_of_memory,
                std::string("cudaMalloc of ") + std::to_string(bytes) + " B for " + what + " failed: " +
                    cudaGetErrorString(status),
                __FILE__, __LINE__);
  }
  device_ptr<T> owned(static_cast<T*>(p));
  WARPVM_CUDA_TRY(cudaMemset(p, 0, bytes));
  return owned;
}

}  // namespace warpvm::detail
