// warpvm::ops::gather: out[k, :] = table[ids[k], :], a warp per output row.

#include "ops_device.cuh"
#include "ops_host.hpp"

namespace warpvm {
namespace detail {
namespace {

/// A gather moves bytes: one kernel per element size (E: an unsigned type of that size).
template <class E, class I>
__global__ void gather_kernel(array<E> table, std::uint64_t dim, const I* ids, std::uint64_t count, E* out) {
  if (failure_on_record(table.cache_view())) return;
  const unsigned lane = lane_id();
  const std::uint64_t warps = warp_count();
  // Warp w copies rows w, w + warps, ...; it looks up 32 of them at once, lane j the j-th.
  for (std::uint64_t base = warp_index(); base < count; base += 32 * warps) {
    const std::uint64_t my_k = base + lane * warps;
    const bool named = my_k < count;
    const std::uint64_t my_first = named ? row_of(ids, my_k) * dim : 0;
    const E* my_data = nullptr;
    const unsigned found = find_rows_in_core(table, named, my_first, dim, my_data);
    for (unsigned j = 0; j < 32 && base + j * warps < count; ++j) {
      const std::uint64_t k = base + j * warps;
      auto* row_out = reinterpret_cast<std::byte*>(out + k * dim);
      if ((found >> j) & 1u) {
        copy_bytes(row_out, reinterpret_cast<const std::byte*>(shuffle_pointer(my_data, j)), dim * sizeof(E), lane);
        continue;
      }
      const std::uint64_t first = __shfl_sync(~0u, my_first, j);
      for_each_segment<access::read>(table, first, dim, [&](const E* from, RowSegment segment) {
        copy_bytes(row_out + (segment.first - first) * sizeof(E), reinterpret_cast<const std::byte*>(from),
                   segment.count * sizeof(E), lane);
      });
    }
  }
}

template <class F>
void with_element_size(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(TypeTag<std::uint8_t>{}); break;
    case 2: f(TypeTag<std::uint16_t>{}); break;
    case 4: f(TypeTag<std::uint32_t>{}); break;
    default: f(TypeTag<std::uint64_t>{}); break;
  }
}

}  // namespace
}  // namespace detail

namespace ops {

void gather(Runtime& rt, const Table& table, Indices ids, void* out, cudaStream_t stream) {
  if (ids.count == 0) return;
  WARPVM_EXPECT_ARGUMENT(ids.data != nullptr && out != nullptr, "gather", "ids and out must be device memory");
  detail::check_indices(rt, table, ids, table.rows, detail::FailureCause::gather_ids, stream);
  const detail::LaunchShape shape = detail::launch_shape(rt, ids.count, /*per_warp=*/true);
  detail::with_element_size(size_of(table.dtype), [&](auto element) {
    using E = typename decltype(element)::type;
    detail::with_index_type(ids.type, [&](auto index) {
      using I = typename decltype(index)::type;
      rt.launch_on(stream, detail::gather_kernel<E, I>, dim3(shape.blocks), dim3(shape.threads), 0,
                   array<E>(table.cache, table.object, table.checked), table.dim, static_cast<const I*>(ids.data),
                   ids.count, static_cast<E*>(out));
    });
  });
}

}  // namespace ops
}  // namespace warpvm
