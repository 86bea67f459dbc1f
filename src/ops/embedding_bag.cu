// warpvm::ops::embedding_bag: PyTorch's EmbeddingBag (sum or mean, optional per-sample weights)
// over a paged table, a warp per bag.

#include "ops_device.cuh"
#include "ops_host.hpp"

namespace warpvm {
namespace detail {
namespace {

/// Columns a warp sums at once: per lane, this many accumulators in registers.
constexpr unsigned columns_per_lane = 4;
constexpr std::uint64_t chunk_columns = 32 * columns_per_lane;

template <ops::Dtype D, class I>
__global__ void embedding_bag_kernel(array<typename Element<D>::type> table, std::uint64_t dim, const I* ids,
                                     std::uint64_t ids_count, const I* offsets, std::uint64_t offsets_count,
                                     std::uint64_t bags, bool mean, const typename Element<D>::type* weights,
                                     typename Element<D>::type* out) {
  using T = typename Element<D>::type;
  using Sum = typename Element<D>::Sum;
  if (failure_on_record(table.cache_view())) return;
  const unsigned lane = lane_id();
  for (std::uint64_t bag = warp_index(); bag < bags; bag += warp_count()) {
    const auto begin = static_cast<std::uint64_t>(offsets[bag]);
    const auto end = bag + 1 < offsets_count ? static_cast<std::uint64_t>(offsets[bag + 1]) : ids_count;
    for (std::uint64_t chunk = 0; chunk < dim; chunk += chunk_columns) {
      const std::uint64_t width = dim - chunk < chunk_columns ? dim - chunk : chunk_columns;
      Sum sum[columns_per_lane] = {};
      // The bag's ids 32 at a time: lane j looks up the j-th row (find_rows_in_core), then the
      // warp adds the rows in order, so the sums are the same however the rows were found.
      for (std::uint64_t base = begin; base < end; base += 32) {
        const auto batch = static_cast<unsigned>(end - base < 32 ? end - base : 32);
        const bool named = lane < batch;
        const std::uint64_t my_first = named ? row_of(ids, base + lane) * dim + chunk : 0;
        const Sum my_weight = named && weights != nullptr ? Element<D>::widen(weights[base + lane]) : Sum{1};
        const T* my_data = nullptr;
        const unsigned found = find_rows_in_core(table, named, my_first, width, my_data);
        auto add_row = [&](const T* from, Sum weight, std::uint32_t low, std::uint32_t columns) {
#pragma unroll
          for (unsigned c = 0; c < columns_per_lane; ++c) {
            const std::uint32_t column = lane + 32 * c;
            if (column >= low && column < low + columns)
              sum[c] += weight * Element<D>::widen(load_through_l2(from + (column - low)));
          }
        };
        if (found == (batch == 32 ? ~0u : (1u << batch) - 1u)) {  // all in core: loads of several rows in flight
#pragma unroll 4
          for (unsigned j = 0; j < batch; ++j)
            add_row(shuffle_pointer(my_data, j), __shfl_sync(~0u, my_weight, j), 0, static_cast<std::uint32_t>(width));
          continue;
        }
        for (unsigned j = 0; j < batch; ++j) {
          const Sum weight = __shfl_sync(~0u, my_weight, j);
          if ((found >> j) & 1u) {
            add_row(shuffle_pointer(my_data, j), weight, 0, static_cast<std::uint32_t>(width));
            continue;
          }
          const std::uint64_t first = __shfl_sync(~0u, my_first, j);
          for_each_segment<access::read>(table, first, width, [&](const T* from, RowSegment segment) {
            add_row(from, weight, static_cast<std::uint32_t>(segment.first - first), segment.count);
          });
        }
      }
      const Sum scale = mean && end > begin ? Sum{1} / static_cast<Sum>(end - begin) : Sum{1};
#pragma unroll
      for (unsigned c = 0; c < columns_per_lane; ++c) {
        const std::uint32_t column = lane + 32 * c;
        if (column < width) out[bag * dim + chunk + column] = Element<D>::narrow(sum[c] * scale);
      }
    }
  }
}

}  // namespace
}  // namespace detail

namespace ops {

void embedding_bag(Runtime& rt, const Table& table, Indices ids, Indices offsets, bool include_last_offset,
                   BagMode mode, const void* per_sample_weights, void* out, cudaStream_t stream) {
  const char* op = "embedding_bag";
  WARPVM_EXPECT_ARGUMENT(is_floating(table.dtype), op,
                         std::string("table '") + table.name + "' is " + to_string(table.dtype) +
                             "; bags are sums of float16, bfloat16, float32 or float64");
  WARPVM_EXPECT_ARGUMENT(per_sample_weights == nullptr || mode == BagMode::sum, op,
                         "per_sample_weights are only for mode sum (as in PyTorch)");
  WARPVM_EXPECT_ARGUMENT(!include_last_offset || offsets.count >= 1, op,
                         "include_last_offset needs at least one offset");
  WARPVM_EXPECT_ARGUMENT(ids.count == 0 || ids.type == offsets.type, op,
                         "ids and offsets must have the same index type");
  const std::uint64_t bags = include_last_offset ? offsets.count - 1 : offsets.count;
  if (bags == 0) return;
  WARPVM_EXPECT_ARGUMENT(offsets.data != nullptr && out != nullptr && (ids.count == 0 || ids.data != nullptr), op,
                         "ids, offsets and out must be device memory");
  detail::check_offsets(rt, table, offsets, ids.count, stream);
  if (ids.count != 0) detail::check_indices(rt, table, ids, table.rows, detail::FailureCause::embedding_bag_ids, stream);
  const detail::LaunchShape shape = detail::launch_shape(rt, bags, /*per_warp=*/true);
  detail::with_dtype(table.dtype, [&](auto dtype) {
    constexpr Dtype D = decltype(dtype)::value;
    if constexpr (is_floating(D)) {
      using T = typename detail::Element<D>::type;
      detail::with_index_type(offsets.type, [&](auto index) {
        using I = typename decltype(index)::type;
        rt.launch_on(stream, detail::embedding_bag_kernel<D, I>, dim3(shape.blocks), dim3(shape.threads), 0,
                     array<T>(table.cache, table.object, table.checked), table.dim, static_cast<const I*>(ids.data),
                     ids.count, static_cast<const I*>(offsets.data), offsets.count, bags, mode == BagMode::mean,
                     static_cast<const T*>(per_sample_weights), static_cast<T*>(out));
      });
    }
  });
}

}  // namespace ops
}  // namespace warpvm
