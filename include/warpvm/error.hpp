#pragma once
/// @file
/// One error vocabulary: every failure reaches the user as a warpvm::Error that says what
/// went wrong, where, and (when known) which object.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace warpvm {

/// What kind of failure an Error reports.
enum class ErrorKind : std::uint8_t {
  invalid_config,   ///< a Config that cannot work (bad page size, cache too small, ...)
  invalid_argument, ///< bad input to a host API call
  out_of_memory,    ///< a host or device allocation failed
  cuda,             ///< a CUDA runtime call failed
  index_out_of_range, ///< checked mode: a kernel indexed past an object's end
  no_progress,      ///< a kernel could not free a frame within the watchdog time
  no_device,        ///< no CUDA device is visible
  invalid_free,     ///< checked mode: a kernel freed heap memory twice, or memory the heap did not give
};

/// Returns a short lowercase name for an ErrorKind (for messages and logs).
const char* to_string(ErrorKind kind) noexcept;

/// The only exception type warpvm throws.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what, const char* file, int line);
  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
[[noreturn]] void throw_error(ErrorKind kind, const std::string& what, const char* file, int line);
[[noreturn]] void throw_cuda_error(int code, const char* call, const char* file, int line);
}  // namespace detail

}  // namespace warpvm

/// Throws warpvm::Error(kind, message) unless cond holds.
#define WARPVM_EXPECTS(cond, kind, message)                                           \
  do {                                                                                \
    if (!(cond)) ::warpvm::detail::throw_error((kind), (message), __FILE__, __LINE__); \
  } while (0)

/// Checks a CUDA runtime call; throws warpvm::Error(ErrorKind::cuda) naming the call on failure.
#define WARPVM_CUDA_TRY(call)                                                               \
  do {                                                                                      \
    const int warpvm_status_ = static_cast<int>(call);                                      \
    if (warpvm_status_ != 0)                                                                \
      ::warpvm::detail::throw_cuda_error(warpvm_status_, #call, __FILE__, __LINE__);        \
  } while (0)
