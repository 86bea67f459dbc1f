// warpvm::ops::index_add: table[ids[k], :] += values[k, :] with atomics, a warp per added row.

#include "ops_device.cuh"
#include "ops_host.hpp"

namespace warpvm {
namespace detail {
namespace {

template <ops::Dtype D, class I>
__global__ void index_add_kernel(array<typename Element<D>::type> table, std::uint64_t dim, const I* ids,
                                 std::uint64_t count, const typename Element<D>::type* values) {
  using T = typename Element<D>::type;
  if (failure_on_record(table.cache_view())) return;
  const unsigned lane = lane_id();
  for (std::uint64_t k = warp_index(); k < count; k += warp_count()) {
    const std::uint64_t first = row_of(ids, k) * dim;
    const T* row_values = values + k * dim;
    // read_write spans: the page migrates and its frame is marked dirty, so flush() lands it.
    for_each_segment<access::read_write>(table, first, dim, [&](T* to, RowSegment segment) {
      const T* from = row_values + (segment.first - first);
      for (std::uint32_t j = lane; j < segment.count; j += 32) Element<D>::add(to + j, from[j]);
    });
  }
}

}  // namespace
}  // namespace detail

namespace ops {

void index_add(Runtime& rt, const Table& table, Indices ids, const void* values, cudaStream_t stream) {
  const char* op = "index_add";
  WARPVM_EXPECT_ARGUMENT(table.dtype != Dtype::uint8, op,
                         "table '" + table.name + "' is uint8, which has no atomic add; use int32");
  if (ids.count == 0) return;
  WARPVM_EXPECT_ARGUMENT(ids.data != nullptr && values != nullptr, op, "ids and values must be device memory");
  // Every id is checked before the kernel that adds runs: a bad one leaves the table as it was.
  detail::check_indices(rt, table, ids, table.rows, detail::FailureCause::index_add_ids, stream);
  const detail::LaunchShape shape = detail::launch_shape(rt, ids.count, /*per_warp=*/true);
  detail::with_dtype(table.dtype, [&](auto dtype) {
    constexpr Dtype D = decltype(dtype)::value;
    if constexpr (D != Dtype::uint8) {
      using T = typename detail::Element<D>::type;
      detail::with_index_type(ids.type, [&](auto index) {
        using I = typename decltype(index)::type;
        rt.launch_on(stream, detail::index_add_kernel<D, I>, dim3(shape.blocks), dim3(shape.threads), 0,
                     array<T>(table.cache, table.object, table.checked), table.dim, static_cast<const I*>(ids.data),
                     ids.count, static_cast<const T*>(values));
      });
    }
  });
}

}  // namespace ops
}  // namespace warpvm
