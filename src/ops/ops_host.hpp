#pragma once
// Host pieces shared by warpvm::ops' operations: type dispatch, launch shapes, argument checks
// and the device-side input check that runs before an op writes anything. Internal to src/ops.

#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/ops.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace warpvm::detail {

template <class T>
struct TypeTag {
  using type = T;
};

/// f(TypeTag<I>{}) for the C++ type of an Indices::Type.
template <class F>
void with_index_type(ops::Indices::Type type, F&& f) {
  if (type == ops::Indices::Type::int32)
    f(TypeTag<std::int32_t>{});
  else
    f(TypeTag<std::int64_t>{});
}

/// f(std::integral_constant<ops::Dtype, D>{}) for a runtime dtype.
template <class F>
void with_dtype(ops::Dtype dtype, F&& f) {
  using ops::Dtype;
  switch (dtype) {
    case Dtype::float16: f(std::integral_constant<Dtype, Dtype::float16>{}); break;
    case Dtype::bfloat16: f(std::integral_constant<Dtype, Dtype::bfloat16>{}); break;
    case Dtype::float32: f(std::integral_constant<Dtype, Dtype::float32>{}); break;
    case Dtype::float64: f(std::integral_constant<Dtype, Dtype::float64>{}); break;
    case Dtype::int32: f(std::integral_constant<Dtype, Dtype::int32>{}); break;
    case Dtype::int64: f(std::integral_constant<Dtype, Dtype::int64>{}); break;
    case Dtype::uint8: f(std::integral_constant<Dtype, Dtype::uint8>{}); break;
  }
}

/// A 1-D launch of whole warps that the runtime's launch check accepts: `per_warp` = true gives
/// a warp per item, false a thread per item; the grid strides over the rest.
struct LaunchShape {
  unsigned blocks;
  unsigned threads;
};
[[nodiscard]] LaunchShape launch_shape(const Runtime& rt, std::uint64_t items, bool per_warp);

/// Throws Error(invalid_argument) "<op>: <message>" unless `condition`. A macro so that the
/// message is built only on failure: the checks run on every op call.
#define WARPVM_EXPECT_ARGUMENT(condition, op, message) \
  WARPVM_EXPECTS(condition, ::warpvm::ErrorKind::invalid_argument, std::string(op) + ": " + (message))

/// Queues, on `stream`, the check that every entry of `ids` is in [0, limit): the first one
/// outside is recorded (FailureCause `site`, naming object `object_id`), and the op kernels queued
/// after it then write nothing.
void check_indices(Runtime& rt, const ops::Table& table, ops::Indices ids, std::uint64_t limit, FailureCause site,
                   cudaStream_t stream);
/// The same for embedding_bag's offsets: each in [previous offset, ids_count], the first >= 0.
void check_offsets(Runtime& rt, const ops::Table& table, ops::Indices offsets, std::uint64_t ids_count,
                   cudaStream_t stream);

}  // namespace warpvm::detail
