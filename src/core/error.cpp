#include "warpvm/error.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace warpvm {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::invalid_config: return "invalid config";
    case ErrorKind::invalid_argument: return "invalid argument";
    case ErrorKind::out_of_memory: return "out of memory";
    case ErrorKind::cuda: return "cuda error";
    case ErrorKind::index_out_of_range: return "index out of range";
    case ErrorKind::no_progress: return "no progress";
    case ErrorKind::no_device: return "no device";
    case ErrorKind::invalid_free: return "invalid free";
  }
  return "unknown";
}

namespace {
std::string decorate(ErrorKind kind, const std::string& what, const char* file, int line) {
  return std::string("warpvm: ") + to_string(kind) + ": " + what + " (" + file + ":" +
         std::to_string(line) + ")";
}
}  // namespace

Error::Error(ErrorKind kind, const std::string& what, const char* file, int line)
    : std::runtime_error(decorate(kind, what, file, line)), kind_(kind) {}

namespace detail {

void throw_error(ErrorKind kind, const std::string& what, const char* file, int line) {
  throw Error(kind, what, file, line);
}

void throw_cuda_error(int code, const char* call, const char* file, int line) {
  const auto status = static_cast<cudaError_t>(code);
  const ErrorKind kind =
      status == cudaErrorMemoryAllocation ? ErrorKind::out_of_memory
      : (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) ? ErrorKind::no_device
                                                                                : ErrorKind::cuda;
  throw Error(kind,
              std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) + ")",
              file, line);
}

}  // namespace detail
}  // namespace warpvm
