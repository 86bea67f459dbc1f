#pragma once
/// @file
/// warpvm::ops: device operations over paged objects, for the data paths of GNN and
/// recommendation models: gather rows by index, embedding bags, scatter-add (index_add) and
/// uniform neighbour sampling over a paged CSR graph. Tables live in the paged space (pinned
/// host memory, cached in the device's frames); ids, outputs and values are device memory of the
/// caller's. Every operation is queued on the caller's stream, after the work already queued
/// there, through the Runtime's launch (its progress check and error record apply).
///
/// @code
///   warpvm::Runtime rt({.cache_bytes = 8ull << 30});
///   auto features = rt.alloc<float>(rows * dim, warpvm::Placement::automatic, "features");
///   const auto table = warpvm::ops::table(features, dim);        // [rows, dim]
///   warpvm::ops::gather(rt, table, warpvm::ops::Indices::of(ids, n), out, stream);   // out: [n, dim]
///   rt.synchronize();                                              // a bad id is raised here
/// @endcode
///
/// Inputs are checked on the device before anything is written: an id outside the table (or an
/// offset or seed out of range) is recorded, the operation writes nothing, and the next call that
/// waits for the device (Runtime::synchronize, flush, stats; count_sampled_neighbors at once)
/// throws Error(index_out_of_range) naming the operation, the input, the value and the table.
/// Host-side mistakes (a dtype the operation does not take, sizes that do not match) throw
/// Error(invalid_argument) at once, before anything is queued.
///
/// How rows map onto pages: a row is `dim` consecutive elements of the object; rows whose bytes
/// do not divide the page size straddle pages, and a warp walks such a row one page at a time,
/// so any row size works. One warp handles one output row (or bag, or added row); its lanes copy
/// with the widest aligned vector loads (16 bytes when row and output are aligned).

#include "warpvm/array.hpp"
#include "warpvm/error.hpp"
#include "warpvm/runtime.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace warpvm::ops {

/// Element types of tables, outputs and values (as PyTorch names them).
enum class Dtype : std::uint8_t { float16, bfloat16, float32, float64, int32, int64, uint8 };
[[nodiscard]] std::size_t size_of(Dtype dtype) noexcept;
[[nodiscard]] const char* to_string(Dtype dtype) noexcept;
[[nodiscard]] constexpr bool is_floating(Dtype dtype) {
  return dtype == Dtype::float16 || dtype == Dtype::bfloat16 || dtype == Dtype::float32 || dtype == Dtype::float64;
}

/// A device array of row ids (or offsets, or seeds): int32 or int64.
struct Indices {
  enum class Type : std::uint8_t { int32, int64 };
  const void* data = nullptr;
  std::uint64_t count = 0;
  Type type = Type::int64;

  [[nodiscard]] static Indices of(const std::int32_t* data, std::uint64_t count) { return {data, count, Type::int32}; }
  [[nodiscard]] static Indices of(const std::int64_t* data, std::uint64_t count) { return {data, count, Type::int64}; }
};

/// A paged object seen as a row-major table of `rows` rows of `dim` elements of `dtype` (a 1-D
/// object is dim 1). Made by table(); it does not own the object, which must outlive its use.
struct Table {
  detail::CacheView cache{};
  detail::ObjectDescriptor object{};
  bool checked = false;
  std::uint64_t rows = 0;
  std::uint64_t dim = 1;
  Dtype dtype = Dtype::float32;
  std::string name;
};

/// `o` as a table of `dim` columns of `dtype`, whose size must divide the object's bytes into
/// whole rows (for instance an object<std::uint16_t> holding float16 or bfloat16 values, or raw
/// bytes). Throws Error(invalid_argument) otherwise.
template <class T>
[[nodiscard]] Table table(const object<T>& o, std::uint64_t dim, Dtype dtype) {
  const array<T> handle = o.device();
  const std::uint64_t row_bytes = dim * size_of(dtype);
  WARPVM_EXPECTS(dim > 0 && row_bytes / dim == size_of(dtype) && o.bytes() % row_bytes == 0,
                 ErrorKind::invalid_argument,
                 "ops::table: '" + o.name() + "' has " + std::to_string(o.bytes()) + " bytes, not whole rows of " +
                     std::to_string(dim) + " x " + to_string(dtype));
  return {handle.cache_view(), handle.descriptor(), handle.checked(), o.bytes() / row_bytes, dim, dtype, o.name()};
}
/// `o` as a table of `dim` columns of its own element type (float, double, int32, int64, uint8).
template <class T>
[[nodiscard]] Table table(const object<T>& o, std::uint64_t dim = 1) {
  constexpr Dtype dtype = std::is_same_v<T, float>          ? Dtype::float32
                          : std::is_same_v<T, double>       ? Dtype::float64
                          : std::is_same_v<T, std::int32_t> ? Dtype::int32
                          : std::is_same_v<T, std::int64_t> ? Dtype::int64
                                                            : Dtype::uint8;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t>,
                "ops::table(object<T>, dim): give the Dtype for other element types (float16, bfloat16)");
  return table(o, dim, dtype);
}

/// out[k, :] = table[ids[k], :] for k < ids.count. `out`: device memory, ids.count x dim elements
/// of the table's dtype (any dtype).
void gather(Runtime& rt, const Table& table, Indices ids, void* out, cudaStream_t stream = nullptr);

enum class BagMode : std::uint8_t { sum, mean };

/// PyTorch's embedding_bag: bag b is ids[offsets[b] .. offsets[b + 1]) (the last bag ends at
/// ids.count, or at offsets' last entry with include_last_offset, when offsets has a bag more
/// than out has rows); out[b, :] = the sum (or the mean) of table[id, :] over the bag, each row
/// times per_sample_weights[k] when given (sum only; ids.count values of the table's dtype). An
/// empty bag gives zeros. Floating dtypes; accumulated in float (double for float64). Offsets
/// must not decrease and must stay within [0, ids.count].
void embedding_bag(Runtime& rt, const Table& table, Indices ids, Indices offsets, bool include_last_offset,
                   BagMode mode, const void* per_sample_weights, void* out, cudaStream_t stream = nullptr);

/// table[ids[k], :] += values[k, :] for every k, with atomics: duplicate ids add up. `values`:
/// device memory, ids.count x dim elements of the table's dtype (float16, bfloat16, float32,
/// float64, int32, int64). The pages written are dirty: Runtime::flush() lands them in host
/// memory. Every id is checked before any row is touched.
void index_add(Runtime& rt, const Table& table, Indices ids, const void* values, cudaStream_t stream = nullptr);

/// Neighbour sampling over a paged CSR graph (indptr: nodes + 1 entries, indices: the
/// neighbours; int32 or int64 tables), in two calls. First this one: out_indptr (device memory,
/// seeds.count + 1 int64) becomes the sample's offsets, min(degree, fanout) per seed; it waits
/// for the stream, raises any input error, and returns the sample's size (out_indptr's last
/// entry), for the caller to allocate out_indices.
[[nodiscard]] std::uint64_t count_sampled_neighbors(Runtime& rt, const Table& indptr, const Table& indices,
                                                    Indices seeds, std::uint32_t fanout, std::int64_t* out_indptr,
                                                    cudaStream_t stream = nullptr);
/// Then this one: out_indices[out_indptr[i] ..] gets seed i's sample, as int64 node ids: all its
/// neighbours when its degree <= fanout (in CSR order), else `fanout` distinct ones drawn
/// uniformly without replacement. The same (graph, seeds, fanout, seed) gives the same sample.
void sample_neighbors(Runtime& rt, const Table& indptr, const Table& indices, Indices seeds, std::uint32_t fanout,
                      std::uint64_t seed, const std::int64_t* out_indptr, std::int64_t* out_indices,
                      cudaStream_t stream = nullptr);

}  // namespace warpvm::ops
