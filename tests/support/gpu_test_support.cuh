#pragma once
// Shared pieces of the GPU test suite.

#include "warpvm/warpvm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace warpvm::testing {

/// Skips (saying so) when no GPU is visible, so the suite runs everywhere.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

/// Streaming multiprocessors of device 0 (launch shapes scale with it).
inline std::uint64_t sm_count() {
  int sms = 0;
  WARPVM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return static_cast<std::uint64_t>(sms);
}

/// Deterministic per-(seed, step) random numbers, the same on host and device.
__host__ __device__ inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Initial content of element i of a test object with salt s: never zero, differs per object.
__host__ __device__ inline std::uint32_t initial_value(std::uint64_t i, std::uint32_t salt) {
  return static_cast<std::uint32_t>(mix(i * 2654435761ull + salt)) | 1u;
}

/// Fills host memory of an object with initial_value.
template <class Object>
void fill_initial(const Object& object, std::uint32_t salt) {
  auto host = object.host();
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = initial_value(i, salt);
}

/// A device buffer of T for per-thread results, freed on scope exit.
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(std::size_t n) : size_(n) {
    WARPVM_CUDA_TRY(cudaMalloc(&data_, n * sizeof(T)));
    WARPVM_CUDA_TRY(cudaMemset(data_, 0, n * sizeof(T)));
  }
  /// A copy of `contents`.
  explicit DeviceVector(const std::vector<T>& contents) : size_(contents.size()) {
    WARPVM_CUDA_TRY(cudaMalloc(&data_, size_ * sizeof(T)));
    WARPVM_CUDA_TRY(cudaMemcpy(data_, contents.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    WARPVM_CUDA_TRY(cudaMemcpy(out.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_;
};

/// Mapped pinned host memory, freed on scope exit: what zero-copy kernels read and host-polled
/// flags live in.
class MappedBuffer {
 public:
  /// `bytes` of it, zeroed.
  explicit MappedBuffer(std::size_t bytes) {
    WARPVM_CUDA_TRY(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped));
    std::memset(host_, 0, bytes);
    WARPVM_CUDA_TRY(cudaHostGetDevicePointer(&device_, host_, 0));
  }
  /// A copy of `contents`.
  template <class T>
  explicit MappedBuffer(const std::vector<T>& contents) : MappedBuffer(contents.size() * sizeof(T)) {
    std::copy(contents.begin(), contents.end(), host<T>());
  }
  ~MappedBuffer() { cudaFreeHost(host_); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  template <class T>
  T* host() const {
    return static_cast<T*>(host_);
  }
  template <class T>
  T* device() const {
    return static_cast<T*>(device_);
  }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

}  // namespace warpvm::testing
