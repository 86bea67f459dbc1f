// warpvm::ops::count_sampled_neighbors and sample_neighbors: uniform neighbour sampling without
// replacement over a paged CSR graph, a thread per seed (detail/ops/sampling.hpp has the
// algorithm).

#include "ops_device.cuh"
#include "ops_host.hpp"

#include "warpvm/detail/ops/sampling.hpp"

#include <cub/device/device_scan.cuh>

namespace warpvm {
namespace detail {
namespace {

/// out_indptr[i + 1] = min(degree, fanout) of seed i (out_indptr[0] = 0); a seed outside the
/// graph, or an indptr that is not a CSR's, is recorded and counts 0.
template <class P, class S>
__global__ void count_kernel(array<P> indptr, std::uint64_t indices_count, const S* seeds, std::uint64_t count,
                             std::uint32_t fanout, std::int64_t* out_indptr) {
  const std::uint64_t nodes = indptr.size() - 1;
  for (std::uint64_t i = thread_index(); i < count; i += thread_count()) {
    if (i == 0) out_indptr[0] = 0;
    const auto node = static_cast<std::int64_t>(seeds[i]);
    std::uint64_t sampled = 0;
    if (node < 0 || static_cast<std::uint64_t>(node) >= nodes) {
      record_error(indptr.cache_view(), ErrorKind::index_out_of_range, indptr.id(), static_cast<std::uint64_t>(node),
                   nodes, FailureCause::sample_seeds);
    } else {
      const auto begin = static_cast<std::int64_t>(indptr[static_cast<std::uint64_t>(node)]);
      const auto end = static_cast<std::int64_t>(indptr[static_cast<std::uint64_t>(node) + 1]);
      if (begin < 0 || end < begin || static_cast<std::uint64_t>(end) > indices_count)
        record_error(indptr.cache_view(), ErrorKind::index_out_of_range, indptr.id(), static_cast<std::uint64_t>(node),
                     indices_count, FailureCause::sample_indptr);
      else
        sampled = sample_size(static_cast<std::uint64_t>(end - begin), fanout);
    }
    out_indptr[i + 1] = static_cast<std::int64_t>(sampled);
  }
}

/// Seed i's sample into out_indices[out_indptr[i] ..]: positions first (Floyd), then the
/// neighbours at those positions, in place.
template <class P, class N, class S>
__global__ void sample_kernel(array<P> indptr, array<N> indices, const S* seeds, std::uint64_t count,
                              std::uint32_t fanout, std::uint64_t seed, const std::int64_t* out_indptr,
                              std::int64_t* out_indices) {
  if (failure_on_record(indptr.cache_view())) return;
  for (std::uint64_t i = thread_index(); i < count; i += thread_count()) {
    const auto node = static_cast<std::uint64_t>(seeds[i]);
    const auto begin = static_cast<std::uint64_t>(indptr[node]);
    const auto degree = static_cast<std::uint64_t>(indptr[node + 1]) - begin;
    std::int64_t* sample = out_indices + out_indptr[i];
    sample_positions(degree, fanout, seed, node, sample);
    const std::uint64_t size = sample_size(degree, fanout);
    for (std::uint64_t k = 0; k < size; ++k)
      sample[k] = static_cast<std::int64_t>(indices[begin + static_cast<std::uint64_t>(sample[k])]);
  }
}

/// f(TypeTag<P>{}) for an int32 or int64 table; other dtypes are refused.
template <class F>
void with_csr_type(const ops::Table& table, const char* what, F&& f) {
  WARPVM_EXPECT_ARGUMENT(table.dim == 1 && (table.dtype == ops::Dtype::int32 || table.dtype == ops::Dtype::int64),
                         "sample_neighbors",
                         std::string(what) + " '" + table.name + "' must be a 1-D int32 or int64 table, not " +
                             std::to_string(table.dim) + " columns of " + ops::to_string(table.dtype));
  if (table.dtype == ops::Dtype::int32)
    f(TypeTag<std::int32_t>{});
  else
    f(TypeTag<std::int64_t>{});
}

void expect_graph(const ops::Table& indptr, const ops::Table& indices, ops::Indices seeds, std::uint32_t fanout) {
  WARPVM_EXPECT_ARGUMENT(indptr.rows >= 1, "sample_neighbors", "indptr '" + indptr.name + "' needs nodes + 1 entries");
  WARPVM_EXPECT_ARGUMENT(fanout >= 1, "sample_neighbors", "fanout must be at least 1");
  WARPVM_EXPECT_ARGUMENT(seeds.count == 0 || seeds.data != nullptr, "sample_neighbors", "seeds must be device memory");
  with_csr_type(indices, "indices", [](auto) {});
}

}  // namespace
}  // namespace detail

namespace ops {

std::uint64_t count_sampled_neighbors(Runtime& rt, const Table& indptr, const Table& indices, Indices seeds,
                                      std::uint32_t fanout, std::int64_t* out_indptr, cudaStream_t stream) {
  detail::expect_graph(indptr, indices, seeds, fanout);
  WARPVM_EXPECT_ARGUMENT(out_indptr != nullptr, "sample_neighbors", "out_indptr must be device memory");
  if (seeds.count == 0) {
    WARPVM_CUDA_TRY(cudaMemsetAsync(out_indptr, 0, sizeof(std::int64_t), stream));
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
    return 0;
  }
  const detail::LaunchShape shape = detail::launch_shape(rt, seeds.count, /*per_warp=*/false);
  detail::with_csr_type(indptr, "indptr", [&](auto offsets) {
    using P = typename decltype(offsets)::type;
    detail::with_index_type(seeds.type, [&](auto index) {
      using S = typename decltype(index)::type;
      rt.launch_on(stream, detail::count_kernel<P, S>, dim3(shape.blocks), dim3(shape.threads), 0,
                   array<P>(indptr.cache, indptr.object, indptr.checked), indices.rows,
                   static_cast<const S*>(seeds.data), seeds.count, fanout, out_indptr);
    });
  });
  // Counts to offsets, in place, on the caller's stream.
  std::size_t scratch_bytes = 0;
  WARPVM_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scratch_bytes, out_indptr + 1, out_indptr + 1,
                                                static_cast<std::int64_t>(seeds.count), stream));
  void* scratch = nullptr;
  WARPVM_CUDA_TRY(cudaMallocAsync(&scratch, scratch_bytes, stream));
  const cudaError_t scanned = cub::DeviceScan::InclusiveSum(scratch, scratch_bytes, out_indptr + 1, out_indptr + 1,
                                                            static_cast<std::int64_t>(seeds.count), stream);
  WARPVM_CUDA_TRY(cudaFreeAsync(scratch, stream));
  WARPVM_CUDA_TRY(scanned);
  std::int64_t total = 0;
  WARPVM_CUDA_TRY(cudaMemcpyAsync(&total, out_indptr + seeds.count, sizeof total, cudaMemcpyDeviceToHost, stream));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
  rt.synchronize();  // a bad seed or indptr is raised here, before anything is sampled
  return static_cast<std::uint64_t>(total);
}

void sample_neighbors(Runtime& rt, const Table& indptr, const Table& indices, Indices seeds, std::uint32_t fanout,
                      std::uint64_t seed, const std::int64_t* out_indptr, std::int64_t* out_indices,
                      cudaStream_t stream) {
  detail::expect_graph(indptr, indices, seeds, fanout);
  if (seeds.count == 0) return;
  WARPVM_EXPECT_ARGUMENT(out_indptr != nullptr && out_indices != nullptr, "sample_neighbors",
                         "out_indptr and out_indices must be device memory");
  const detail::LaunchShape shape = detail::launch_shape(rt, seeds.count, /*per_warp=*/false);
  detail::with_csr_type(indptr, "indptr", [&](auto offsets) {
    using P = typename decltype(offsets)::type;
    detail::with_csr_type(indices, "indices", [&](auto neighbours) {
      using N = typename decltype(neighbours)::type;
      detail::with_index_type(seeds.type, [&](auto index) {
        using S = typename decltype(index)::type;
        rt.launch_on(stream, detail::sample_kernel<P, N, S>, dim3(shape.blocks), dim3(shape.threads), 0,
                     array<P>(indptr.cache, indptr.object, indptr.checked),
                     array<N>(indices.cache, indices.object, indices.checked), static_cast<const S*>(seeds.data),
                     seeds.count, fanout, seed, out_indptr, out_indices);
      });
    });
  });
}

}  // namespace ops
}  // namespace warpvm
