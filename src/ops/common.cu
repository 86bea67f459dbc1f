// What warpvm::ops' operations share: dtype names and sizes, launch shapes, argument checks and
// the device-side input checks that run before an op writes anything.

#include "ops_device.cuh"
#include "ops_host.hpp"

#include <algorithm>

namespace warpvm {
namespace ops {

std::size_t size_of(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::float16:
    case Dtype::bfloat16: return 2;
    case Dtype::float32:
    case Dtype::int32: return 4;
    case Dtype::float64:
    case Dtype::int64: return 8;
    case Dtype::uint8: return 1;
  }
  return 0;
}

const char* to_string(Dtype dtype) noexcept {
  switch (dtype) {
    case Dtype::float16: return "float16";
    case Dtype::bfloat16: return "bfloat16";
    case Dtype::float32: return "float32";
    case Dtype::float64: return "float64";
    case Dtype::int32: return "int32";
    case Dtype::int64: return "int64";
    case Dtype::uint8: return "uint8";
  }
  return "unknown";
}

}  // namespace ops

namespace detail {
namespace {

/// Threads per block of the ops' launches: 8 warps.
constexpr unsigned block_threads = 256;
/// Blocks per SM beyond which a grid-stride loop gains nothing.
constexpr unsigned blocks_per_sm = 8;

template <class I>
__global__ void check_indices_kernel(CacheView cache, const I* ids, std::uint64_t count, std::uint64_t limit,
                                     std::uint32_t object_id, FailureCause site) {
  for (std::uint64_t k = thread_index(); k < count; k += thread_count()) {
    const auto id = static_cast<std::int64_t>(ids[k]);
    if (id < 0 || static_cast<std::uint64_t>(id) >= limit)
      record_error(cache, ErrorKind::index_out_of_range, object_id, static_cast<std::uint64_t>(id), limit, site);
  }
}

template <class I>
__global__ void check_offsets_kernel(CacheView cache, const I* offsets, std::uint64_t count, std::uint64_t ids_count,
                                     std::uint32_t object_id) {
  for (std::uint64_t b = thread_index(); b < count; b += thread_count()) {
    const auto offset = static_cast<std::int64_t>(offsets[b]);
    const std::int64_t previous = b == 0 ? 0 : static_cast<std::int64_t>(offsets[b - 1]);
    if (offset < previous || static_cast<std::uint64_t>(offset) > ids_count)
      record_error(cache, ErrorKind::index_out_of_range, object_id, static_cast<std::uint64_t>(offset), ids_count,
                   FailureCause::embedding_bag_offsets);
  }
}

}  // namespace

LaunchShape launch_shape(const Runtime& rt, std::uint64_t items, bool per_warp) {
  // The launch check counts Config::max_pages_held_per_thread for every resident thread (the
  // ops hold one page per lane at a time): stay within what it admits.
  const std::uint64_t admitted = rt.max_resident_threads();
  const unsigned threads = admitted >= block_threads ? block_threads
                                                     : static_cast<unsigned>(std::max<std::uint64_t>(32, admitted / 32 * 32));
  const std::uint64_t per_block = per_warp ? threads / 32 : threads;
  const std::uint64_t wanted = (items + per_block - 1) / per_block;
  const std::uint64_t fitting = std::max<std::uint64_t>(1, admitted / threads);
  const std::uint64_t useful = std::uint64_t{blocks_per_sm} * static_cast<std::uint64_t>(rt.multiprocessor_count());
  return {static_cast<unsigned>(std::max<std::uint64_t>(1, std::min({wanted, fitting, useful}))), threads};
}

void check_indices(Runtime& rt, const ops::Table& table, ops::Indices ids, std::uint64_t limit, FailureCause site,
                   cudaStream_t stream) {
  const LaunchShape shape = launch_shape(rt, ids.count, /*per_warp=*/false);
  with_index_type(ids.type, [&](auto index) {
    using I = typename decltype(index)::type;
    rt.launch_on(stream, check_indices_kernel<I>, dim3(shape.blocks), dim3(shape.threads), 0, table.cache,
                 static_cast<const I*>(ids.data), ids.count, limit, table.object.id, site);
  });
}

void check_offsets(Runtime& rt, const ops::Table& table, ops::Indices offsets, std::uint64_t ids_count,
                   cudaStream_t stream) {
  const LaunchShape shape = launch_shape(rt, offsets.count, /*per_warp=*/false);
  with_index_type(offsets.type, [&](auto index) {
    using I = typename decltype(index)::type;
    rt.launch_on(stream, check_offsets_kernel<I>, dim3(shape.blocks), dim3(shape.threads), 0, table.cache,
                 static_cast<const I*>(offsets.data), offsets.count, ids_count, table.object.id);
  });
}

}  // namespace detail
}  // namespace warpvm
