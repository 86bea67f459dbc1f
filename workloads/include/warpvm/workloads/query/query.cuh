#pragma once
// A columnar filter-aggregate query after DREAM's (its five queries over the Chicago taxi trips):
// over a synthetic trip table stored as separate columns (int32 duration in seconds; float
// miles, fare, extras, tips, tolls), the total miles (Q1), fares (Q2), extras (Q3), tips (Q4) and
// tolls (Q5) of the trips longer than 9000 s. The kernel reads the whole duration column and the
// other five columns only at the matching rows, which the generator makes 0.08% of the table,
// independently per row: bulk copies of whole columns move mostly data nobody reads.
// Two versions of the kernel: plain pointers (grid-stride over rows; device, pinned host or
// managed memory, or one chunk of a bulk copy) and warpvm::array handles (a warp per page of the
// duration column through a page span, the matching rows' values by element access, so a value
// column may be `migrate` or `remote`).
//
// Exact results: every value is a multiple of 1/64 below 2^9 in magnitude, exact as a float, and
// the sums are doubles: any sum of fewer than 2^38 of them is exact, in any order, so the GPU's
// totals equal the CPU reference's bit for bit.
// Used by warpvm-apps-bench and the GPU tests (tests/workloads/apps_test.cu); docs/bench/apps.md
// describes the workload.

#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace warpvm::workloads {

/// Threads per block of the query kernels (whole warps: they reduce with warp shuffles).
inline constexpr unsigned query_block_threads = 256;
/// Pages a thread of trip_query_paged holds at once: the duration span and one value access.
inline constexpr std::uint32_t query_pages_held = 2;
/// The filter: trips longer than this many seconds.
inline constexpr std::int32_t long_trip_seconds = 9000;
/// Per 10,000 rows, how many are long trips (0.08%).
inline constexpr std::uint64_t long_trips_per_10000 = 8;
/// The summed columns, in query order (Q1..Q5).
inline constexpr unsigned trip_value_columns = 5;
inline constexpr const char* trip_value_names[trip_value_columns] = {"miles", "fare", "extras", "tips", "tolls"};
/// Rows the generator takes (its row index keeps to 39 bits; sums stay exact far beyond this).
inline constexpr std::uint64_t trip_max_rows = std::uint64_t{1} << 38;

/// The query's answer: the five totals and the number of matching rows.
struct TripTotals {
  double sum[trip_value_columns] = {};
  unsigned long long trips = 0;

  bool operator==(const TripTotals&) const = default;
};

/// One generated row of the trip table.
struct TripRow {
  std::int32_t duration = 0;
  float value[trip_value_columns] = {};
};

/// Row `row` of the table drawn from `seed`: a pure function, so any split of the rows over
/// threads gives the same table. A long trip (9001..30000 s) with probability 8 in 10,000,
/// otherwise 60..9000 s; values in units of 1/64: miles < 128, fare < 512, extras -5..27 (may be
/// negative, as in the taxi data), tips < 64, tolls < 16.
inline TripRow trip_row(std::uint64_t seed, std::uint64_t row) {
  const std::uint64_t base = workloads::mix64(seed) + 2 * row;
  const std::uint64_t shape = workloads::mix64(base), values = workloads::mix64(base + 1);
  TripRow r;
  const bool long_trip = shape % 10000 < long_trips_per_10000;
  r.duration = static_cast<std::int32_t>(long_trip ? long_trip_seconds + 1 + (shape >> 32) % 21000
                                                   : 60 + (shape >> 32) % (long_trip_seconds - 59));
  auto units = [&](unsigned shift, unsigned bits) { return static_cast<std::int64_t>((values >> shift) & ((1ull << bits) - 1)); };
  r.value[0] = static_cast<float>(units(0, 13)) / 64;          // miles
  r.value[1] = static_cast<float>(units(13, 15)) / 64;         // fare
  r.value[2] = static_cast<float>(units(28, 11) - 320) / 64;   // extras
  r.value[3] = static_cast<float>(units(39, 12)) / 64;         // tips
  r.value[4] = static_cast<float>(units(51, 10)) / 64;         // tolls
  return r;
}

/// Host columns to fill or read: duration and the five value columns, `rows` each.
struct TripColumnPointers {
  std::int32_t* duration = nullptr;
  float* value[trip_value_columns] = {};
};

/// Throws std::invalid_argument unless rows is in [1, trip_max_rows].
inline void validate_trip_rows(std::uint64_t rows) {
  if (rows < 1 || rows > trip_max_rows)
    throw std::invalid_argument("rows = " + std::to_string(rows) + " is outside 1.." + std::to_string(trip_max_rows));
}

/// Writes the table drawn from `seed` into `columns`, rows split over `pfor(rows, body(begin, end))`.
template <class ParallelFor = workloads::SerialFor>
void fill_trips(const TripColumnPointers& columns, std::uint64_t rows, std::uint64_t seed, ParallelFor&& pfor = {}) {
  pfor(rows, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) {
      const TripRow r = trip_row(seed, i);
      columns.duration[i] = r.duration;
      for (unsigned c = 0; c < trip_value_columns; ++c) columns.value[c][i] = r.value[c];
    }
  });
}

/// The query's answer computed on the host from the stored columns (exact: see the file comment).
template <class ParallelFor = workloads::SerialFor>
TripTotals reference_query(const TripColumnPointers& columns, std::uint64_t rows, ParallelFor&& pfor = {}) {
  TripTotals total;
  std::mutex merge;
  pfor(rows, [&](std::uint64_t begin, std::uint64_t end) {
    TripTotals part;
    for (std::uint64_t i = begin; i < end; ++i) {
      if (columns.duration[i] <= long_trip_seconds) continue;
      ++part.trips;
      for (unsigned c = 0; c < trip_value_columns; ++c) part.sum[c] += columns.value[c][i];
    }
    const std::lock_guard lock(merge);
    total.trips += part.trips;
    for (unsigned c = 0; c < trip_value_columns; ++c) total.sum[c] += part.sum[c];
  });
  return total;
}

/// "" when `got` equals `expected` exactly, else what differs.
inline std::string compare_totals(const TripTotals& got, const TripTotals& expected) {
  std::string diff;
  if (got.trips != expected.trips)
    diff += "trips " + std::to_string(got.trips) + ", expected " + std::to_string(expected.trips) + "; ";
  for (unsigned c = 0; c < trip_value_columns; ++c)
    if (got.sum[c] != expected.sum[c])
      diff += std::string(trip_value_names[c]) + " " + std::to_string(got.sum[c]) + ", expected " +
              std::to_string(expected.sum[c]) + "; ";
  return diff;
}

/// Device columns for trip_query_raw (device, pinned host or managed memory).
struct TripColumnsView {
  const std::int32_t* duration = nullptr;
  const float* value[trip_value_columns] = {};
};

/// The columns as warpvm objects for trip_query_paged.
struct TripColumnsPaged {
  array<std::int32_t> duration;
  array<float> value[trip_value_columns];
};

namespace query_detail {

/// A thread's share of the answer, added into `totals` with one atomic per sum per warp. Called
/// by all 32 lanes of the warp together.
struct Partial {
  double sum[trip_value_columns] = {};
  unsigned long long trips = 0;

  template <class ValueAt>
  __device__ void add(std::uint64_t row, ValueAt&& value_at) {
    ++trips;
#pragma unroll
    for (unsigned c = 0; c < trip_value_columns; ++c) sum[c] += value_at(c, row);
  }
  __device__ void flush(TripTotals* totals) {
    for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
      for (unsigned c = 0; c < trip_value_columns; ++c) sum[c] += __shfl_down_sync(0xffffffffu, sum[c], offset);
      trips += __shfl_down_sync(0xffffffffu, trips, offset);
    }
    if (threadIdx.x % 32 != 0 || trips == 0) return;
    for (unsigned c = 0; c < trip_value_columns; ++c) atomicAdd(&totals->sum[c], sum[c]);
    atomicAdd(&totals->trips, trips);
  }
};

}  // namespace query_detail

/// Adds the answer over `rows` rows of `columns` into `totals` (grid-stride over rows; a bulk
/// copy calls it once per chunk).
__global__ void trip_query_raw(TripColumnsView columns, std::uint64_t rows, TripTotals* totals) {
  query_detail::Partial part;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < rows; i += stride)
    if (columns.duration[i] > long_trip_seconds)
      part.add(i, [&](unsigned c, std::uint64_t row) { return columns.value[c][row]; });
  part.flush(totals);
}

/// Adds the answer over the whole table into `totals`: a warp per page of the duration column
/// (lanes interleaved, so the tail page is the only divergence), values read only where a
/// lane's row matches. Every value column must have as many rows as the duration column.
__global__ void trip_query_paged(TripColumnsPaged columns, TripTotals* totals) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t per_page = columns.duration.elements_per_page();
  const std::uint64_t pages = (columns.duration.size() + per_page - 1) / per_page;
  query_detail::Partial part;
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto durations = columns.duration.span(p * per_page);
    for (std::uint32_t k = lane; k < durations.size(); k += 32)
      if (durations[k] > long_trip_seconds)
        part.add(durations.first() + k, [&](unsigned c, std::uint64_t row) { return columns.value[c][row]; });
  }
  part.flush(totals);
}

}  // namespace warpvm::workloads
