#pragma once
// The host-and-device logic of warpvm-channel-bench's GPU-to-GPU workloads, apart from their
// kernels so that the host tests check it (tests/channel/pair_schedules_test.cpp): the sizes
// each workload derives, gemm2gpu's task queue, bfs2gpu's decision to go on, and bitonic2gpu's
// pairing, runs and merge path.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::workloads {

/// Every workload kernel's block: 256 threads, 8 warps.
inline constexpr std::uint32_t block_threads = 256;
inline constexpr std::uint32_t block_warps = block_threads / 32;

// ---- gemm2gpu ---------------------------------------------------------------------------------

/// Rows and columns of a tile; also the rows of a panel (a tile row of T).
inline constexpr std::uint32_t gemm_tile = 64;

/// The sizes that follow from n (a multiple of 2 x gemm_tile).
struct GemmGeometry {
  std::uint32_t n;

  [[nodiscard]] WARPVM_HD std::uint32_t half() const { return n / 2; }
  [[nodiscard]] WARPVM_HD std::uint32_t panels() const { return half() / gemm_tile; }
  [[nodiscard]] WARPVM_HD std::uint64_t panel_words() const { return std::uint64_t{gemm_tile} * n; }
  /// Tiles of one panel's production (its n columns) and of one panel's consumption (C's h columns).
  [[nodiscard]] WARPVM_HD std::uint32_t production_tiles() const { return n / gemm_tile; }
  [[nodiscard]] WARPVM_HD std::uint32_t consumption_tiles() const { return half() / gemm_tile; }
  [[nodiscard]] WARPVM_HD std::uint32_t total_tiles() const {
    return panels() * (production_tiles() + 2 * consumption_tiles());
  }
};

/// What a queue entry asks for.
struct GemmTask {
  enum Kind : std::uint32_t { produce, consume_own, consume_other } kind;
  std::uint32_t panel, tile;  ///< tile: the column tile of T (produce) or of C (consume)
};

/// Queue entry q: step 0 produces panel 0; step s in [1, panels) produces panel s, then consumes
/// this GPU's panel s - 1 and the other's; the last step consumes the last panels.
WARPVM_HD_INLINE GemmTask gemm_task(std::uint32_t q, const GemmGeometry& size) {
  const std::uint32_t production = size.production_tiles(), consumption = size.consumption_tiles();
  if (q < production) return {GemmTask::produce, 0, q};
  const std::uint32_t step_tiles = production + 2 * consumption;
  const std::uint32_t after = q - production, step = 1 + after / step_tiles;
  std::uint32_t r = after % step_tiles;
  if (step < size.panels()) {  // the last step (step == panels) has no production
    if (r < production) return {GemmTask::produce, step, r};
    r -= production;
  }
  return r < consumption ? GemmTask{GemmTask::consume_own, step - 1, r}
                         : GemmTask{GemmTask::consume_other, step - 1, r - consumption};
}

// ---- bfs2gpu ----------------------------------------------------------------------------------

/// Words after the bitmap in a level's message: [0] vertices claimed locally for the next level,
/// [1] bits set in the bitmap; the rest pads the message to 32-word multiples (16-byte windows).
inline constexpr std::uint32_t bfs_header_words = 32;

/// The sizes of the exchange.
struct BfsGeometry {
  std::uint32_t half;        ///< vertices per GPU, a multiple of 1024
  std::uint32_t max_levels;  ///< tags; a search that needs more sets `overflow`

  [[nodiscard]] WARPVM_HD std::uint32_t bitmap_words() const { return half / 32; }
  [[nodiscard]] WARPVM_HD std::uint32_t message_words() const { return bitmap_words() + bfs_header_words; }
  /// Each warp of the exchange block meets one window of the message.
  [[nodiscard]] WARPVM_HD std::uint32_t window_words() const { return message_words() / block_warps; }
  /// `counters`: found per level, then arrived, ready (the levels exchanged so far), stop,
  /// overflow (the last word). A search whose deepest vertex is at depth D exchanges D + 2
  /// levels: level D still marks its vertices' neighbours on the other GPU (their parents among
  /// them), and level D + 1 finds nothing. So max_levels must be at least D + 2.
  [[nodiscard]] WARPVM_HD std::uint32_t counter_words() const { return max_levels + 4; }
  [[nodiscard]] WARPVM_HD std::uint32_t ready_word() const { return max_levels + 1; }
  [[nodiscard]] WARPVM_HD std::uint32_t overflow_word() const { return max_levels + 3; }
};

/// Whether a level follows the one that produced these counts: a vertex can have the next depth
/// only if a GPU claimed one locally or marked one for the other (a marked vertex may turn out
/// reached already; then the next level finds nothing and the one after it does not come).
WARPVM_HD_INLINE constexpr bool bfs_goes_on(std::uint32_t found_here, std::uint32_t marked_here,
                                            std::uint32_t found_there, std::uint32_t marked_there) {
  return found_here + marked_here + found_there + marked_there > 0;
}

// ---- bitonic2gpu ------------------------------------------------------------------------------

/// Keys a tag carries: one chunk, 256 KiB (8 windows of 32 KiB).
inline constexpr std::uint32_t bitonic_chunk = 1u << 16;
/// Outputs of one merge task: 16 per thread.
inline constexpr std::uint32_t bitonic_merge_per_thread = 16;
inline constexpr std::uint32_t bitonic_merge_outputs = bitonic_merge_per_thread * block_threads;

/// The sizes that follow from the keys per GPU (a multiple of bitonic_chunk).
struct BitonicGeometry {
  std::uint32_t half;

  [[nodiscard]] WARPVM_HD std::uint32_t chunks() const { return half / bitonic_chunk; }
  [[nodiscard]] WARPVM_HD std::uint32_t merge_tasks() const {
    return (half + bitonic_merge_outputs - 1) / bitonic_merge_outputs;
  }
  [[nodiscard]] WARPVM_HD std::uint32_t tasks() const { return 2 * chunks() + merge_tasks(); }
  /// `counters`: next task, copied[chunks], pair-ups done, pairs that kept this GPU's own key.
  [[nodiscard]] WARPVM_HD std::uint32_t counter_words() const { return chunks() + 3; }
};

/// Whether pair (own, theirs) keeps this GPU's own key: own keys rise with i while theirs (read
/// from the top) fall, so the low GPU keeps its own over a prefix of the pairs and the high GPU
/// over a suffix (theirs on ties: the keys are equal).
WARPVM_HD_INLINE bool bitonic_keeps_own(bool keeps_low, std::uint32_t own, std::uint32_t theirs) {
  return keeps_low ? own <= theirs : own > theirs;
}

/// Where the two ascending runs of the pairs lie once all are made, `kept` of them with the own
/// key. Run A, the own keys kept, ascends forward: [0, kept) on the low GPU, [h - kept, h) on
/// the high one. Run B, the other's keys kept, falls over the rest and is read backward.
struct BitonicRuns {
  std::uint32_t half, kept;
  bool keeps_low;

  [[nodiscard]] WARPVM_HD std::uint32_t a_size() const { return kept; }
  [[nodiscard]] WARPVM_HD std::uint32_t b_size() const { return half - kept; }
  /// Index into the pairs of run A's key k, and of run B's.
  [[nodiscard]] WARPVM_HD std::uint32_t a_index(std::uint32_t k) const { return keeps_low ? k : half - kept + k; }
  [[nodiscard]] WARPVM_HD std::uint32_t b_index(std::uint32_t k) const {
    return keeps_low ? half - 1 - k : half - kept - 1 - k;
  }
};

/// Merge path: outputs [first, first + count) of merge(A, B), A first on ties, into out[first..].
/// `a(k)` and `b(k)` read key k of each ascending run (na and nb keys).
template <class RunA, class RunB, class Out>
WARPVM_HD void merge_path(const RunA& a, std::uint32_t na, const RunB& b, std::uint32_t nb, std::uint32_t first,
                          std::uint32_t count, Out&& out) {
  // how many of the first `first` outputs come from A: the smallest i with A[i] > B[first - 1 - i]
  std::uint32_t low = first > nb ? first - nb : 0, high = first < na ? first : na;
  while (low < high) {
    const std::uint32_t i = (low + high) / 2;
    if (a(i) <= b(first - 1 - i)) low = i + 1;
    else high = i;
  }
  std::uint32_t i = low, j = first - low;
  for (std::uint32_t k = first; k < first + count; ++k) {
    const bool take_a = j >= nb || (i < na && a(i) <= b(j));
    out(k, take_a ? a(i++) : b(j++));
  }
}

}  // namespace warpvm::workloads
