#pragma once
// Device pieces shared by warpvm::ops' kernels: element types, the warp's walk over a row's page
// segments, and vectorised copies. Internal to src/ops.

#include "warpvm/array.hpp"
#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/detail/ops/row_pages.hpp"
#include "warpvm/ops.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// The C++ type of each Dtype; what a sum of it accumulates in; and its atomic add.
template <ops::Dtype D>
struct Element;
template <>
struct Element<ops::Dtype::float16> {
  using type = __half;
  using Sum = float;
  __device__ static Sum widen(type v) { return __half2float(v); }
  __device__ static type narrow(Sum v) { return __float2half_rn(v); }
  __device__ static void add(type* p, type v) { atomicAdd(p, v); }
};
template <>
struct Element<ops::Dtype::bfloat16> {
  using type = __nv_bfloat16;
  using Sum = float;
  __device__ static Sum widen(type v) { return __bfloat162float(v); }
  __device__ static type narrow(Sum v) { return __float2bfloat16_rn(v); }
  __device__ static void add(type* p, type v) { atomicAdd(p, v); }
};
template <>
struct Element<ops::Dtype::float32> {
  using type = float;
  using Sum = float;
  __device__ static Sum widen(type v) { return v; }
  __device__ static type narrow(Sum v) { return v; }
  __device__ static void add(type* p, type v) { atomicAdd(p, v); }
};
template <>
struct Element<ops::Dtype::float64> {
  using type = double;
  using Sum = double;
  __device__ static Sum widen(type v) { return v; }
  __device__ static type narrow(Sum v) { return v; }
  __device__ static void add(type* p, type v) { atomicAdd(p, v); }
};
template <>
struct Element<ops::Dtype::int32> {
  using type = std::int32_t;
  __device__ static void add(type* p, type v) { atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v)); }
};
template <>
struct Element<ops::Dtype::int64> {
  using type = std::int64_t;
  // Two's complement: an unsigned add is the signed add.
  __device__ static void add(type* p, type v) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  }
};

/// True once any kernel of the runtime has put a failure on record (an op's input check among
/// them): the op then writes nothing. The host clears the claim when it raises the error.
__device__ __forceinline__ bool failure_on_record(const CacheView& cache) { return __ldcg(cache.error_claim) != 0u; }

/// `index` as a row number (ids were checked before the op kernel runs).
template <class I>
__device__ __forceinline__ std::uint64_t row_of(const I* ids, std::uint64_t k) {
  return static_cast<std::uint64_t>(ids[k]);
}

/// The warp copies `vectors` V's, through L2 (the source may be host memory read remotely,
/// whose L1 lines could predate a write-back), four loads in flight per lane.
template <class V>
__device__ __forceinline__ void copy_vectors(std::byte* __restrict__ to, const std::byte* __restrict__ from,
                                             std::uint32_t vectors, unsigned lane) {
  auto* d = reinterpret_cast<V*>(to);
  const auto* s = reinterpret_cast<const V*>(from);
  std::uint32_t v = lane;
  for (; v + 96 < vectors; v += 128) {
    const V a = __ldcg(s + v), b = __ldcg(s + v + 32), c = __ldcg(s + v + 64), e = __ldcg(s + v + 96);
    d[v] = a;
    d[v + 32] = b;
    d[v + 64] = c;
    d[v + 96] = e;
  }
  for (; v < vectors; v += 32) d[v] = __ldcg(s + v);
}

/// The warp copies `bytes` bytes with the widest loads both addresses allow (row_pages.hpp).
__device__ inline void copy_bytes(std::byte* to, const std::byte* from, std::uint32_t bytes, unsigned lane) {
  const unsigned width = copy_width(reinterpret_cast<std::uintptr_t>(to), reinterpret_cast<std::uintptr_t>(from));
  const std::uint32_t vectors = bytes / width;
  switch (width) {
    case 16: copy_vectors<uint4>(to, from, vectors, lane); break;
    case 8: copy_vectors<unsigned long long>(to, from, vectors, lane); break;
    case 4: copy_vectors<unsigned>(to, from, vectors, lane); break;
    case 2: copy_vectors<unsigned short>(to, from, vectors, lane); break;
    default: copy_vectors<unsigned char>(to, from, vectors, lane); break;
  }
  for (std::uint32_t b = vectors * width + lane; b < bytes; b += 32)
    to[b] = static_cast<std::byte>(__ldcg(reinterpret_cast<const unsigned char*>(from) + b));
}

/// Walks elements [first, first + count) of `table` one page segment at a time, the whole warp
/// together (every lane active, with the same arguments), calling visit(data, segment) with
/// `data` pointing at element segment.first. Each lane holds one page at a time. A read of an
/// absent page of a Placement::automatic object goes to host memory while the page's remote
/// budget allows (priced at the segment's sectors: a short row of a big page is read in place,
/// a page read densely migrates), as element reads do; otherwise the page is held through a span
/// (no hold, and no pricing, for a page already in a frame that nothing can evict).
template <access A, class T, class Visit>
__device__ void for_each_segment(const array<T>& table, std::uint64_t first, std::uint64_t count, Visit&& visit) {
  const unsigned element_shift = static_cast<unsigned>(__ffsll(static_cast<long long>(table.elements_per_page())) - 1);
  const ObjectDescriptor& object = table.descriptor();
  const std::uint64_t end = first + count;
  for (std::uint64_t e = first; e < end;) {
    const RowSegment segment = segment_at(e, end, element_shift);
    bool remote = false;
    if constexpr (A == access::read) {
      // In core (nothing can be evicted), or for a resident object, a page already in a frame is
      // read there with no hold and no pricing.
      std::uint32_t frame = 0;
      if (peek_resident_unheld(table.cache_view(), object, table.page_of(e), frame)) {
        visit(reinterpret_cast<const T*>(table.cache_view().frame_data(frame)) + (e & (table.elements_per_page() - 1)),
              segment);
        e += segment.count;
        continue;
      }
      if (object.placement == Placement::automatic && table.cache_view().transport == Transport::gpu_initiated) {
        const auto byte_in_page = static_cast<std::uint32_t>((e & (table.elements_per_page() - 1)) * sizeof(T));
        const SectorProbe probe = sector_probe(byte_in_page, segment.count * sizeof(T), lane_id());
        remote = read_absent_page_remotely(table.cache_view(), object, table.page_of(e), probe.byte_in_page, probe.bytes);
        if (remote) visit(reinterpret_cast<const T*>(object.host) + e, segment);
      }
    }
    if (!remote) {
      const page_span<T, A> span(table, e);
      visit(span.data() + (e - span.first()), segment);
    }
    e += segment.count;
  }
}

/// Up to 32 rows at once, one per lane, found in the cache without holds: lane j names elements
/// [first, first + count) when `named`; where they lie in one page that is in a frame nothing
/// can evict (peek_resident_unheld: in core, or a resident object), the lane's `data` points at
/// them there. Returns the lanes whose rows that found. Their page entries are loaded together,
/// so a warp pays one memory latency for 32 rows' lookups instead of one per row; the others
/// are read through for_each_segment(). Every lane calls it.
template <class T>
__device__ __forceinline__ unsigned find_rows_in_core(const array<T>& table, bool named, std::uint64_t first,
                                                      std::uint64_t count, const T*& data) {
  std::uint32_t frame = 0;
  const bool found = named && table.page_of(first) == table.page_of(first + count - 1) &&
                     peek_resident_unheld(table.cache_view(), table.descriptor(), table.page_of(first), frame);
  data = reinterpret_cast<const T*>(table.cache_view().frame_data(frame)) + (first & (table.elements_per_page() - 1));
  return __ballot_sync(~0u, found);
}

/// Lane `lane`'s pointer, in every lane.
template <class T>
__device__ __forceinline__ const T* shuffle_pointer(const T* p, unsigned lane) {
  return reinterpret_cast<const T*>(__shfl_sync(~0u, reinterpret_cast<std::uintptr_t>(p), lane));
}

/// This warp's index in the grid and the grid's warps (1-D launches of whole warps).
__device__ __forceinline__ std::uint64_t warp_index() {
  return (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
}
__device__ __forceinline__ std::uint64_t warp_count() { return std::uint64_t{gridDim.x} * blockDim.x / 32; }
__device__ __forceinline__ std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ __forceinline__ std::uint64_t thread_count() { return std::uint64_t{gridDim.x} * blockDim.x; }

}  // namespace warpvm::detail
