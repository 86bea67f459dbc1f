#pragma once
/// @file
/// AlignMalloc's intra-warp rearrangement (Section V-A): the threads of a warp share one
/// region, in which each thread's data is cut into 64 KB tiles and the warp's tiles of the
/// same index sit side by side. UVM, which prefetches 64 KB blocks by how much of their
/// neighbourhood is present, then sees the warp's threads moving together through a row
/// rather than one thread's far-apart blocks.

#include "warpvm/detail/alloc/uvm_blocks.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::detail {

/// The order of the lanes' pieces inside each row of the region.
enum class LaneOrder : std::uint8_t {
  lane_id,         ///< lane L at slot L: Eq. 2 as printed
  prefetch_first,  ///< Section V-A's pattern: lanes 0, 1, 2, 4, 6, ... first, then 3, 5, 7, ...
};

/// The slot of `lane` in each row of a region shared by `lanes` lanes (lane < lanes).
/// prefetch_first fills the row's front with lanes 0 and 1 and the even lanes, where UVM's
/// first batch of faults should trigger prefetching, and leaves the odd lanes from 3 on to the
/// back, for the prefetch to bring in.
WARPVM_HD_INLINE constexpr std::uint32_t slot_of_lane(std::uint32_t lane, std::uint32_t lanes, LaneOrder order) {
  if (order == LaneOrder::lane_id || lane < 2) return lane;
  if (lane % 2 == 0) return 1 + lane / 2;
  const std::uint32_t front = 1 + (lanes + 1) / 2;  // lanes 0, 1 and the even lanes from 2
  return front + (lane - 3) / 2;
}

/// The lane at `slot` of each row: the inverse of slot_of_lane.
WARPVM_HD_INLINE constexpr std::uint32_t lane_at_slot(std::uint32_t slot, std::uint32_t lanes, LaneOrder order) {
  if (order == LaneOrder::lane_id || slot < 2) return slot;
  const std::uint32_t front = 1 + (lanes + 1) / 2;
  return slot < front ? 2 * (slot - 1) : 3 + 2 * (slot - front);
}

/// A byte of one lane's data: `lane` is WarpLayout::no_lane where there is none.
struct LaneByte {
  std::uint32_t lane;
  std::uint64_t offset;
};

/// The region of one warp allocation: `lanes` threads (the paper's WS, 1 to 32), each given
/// `bytes_per_lane` (the warp's largest request; a smaller request leaves the rest of its lane
/// untouched, virtual padding), rounded up to 4 KB pages.
///
/// Layout: a lane's bytes are whole 64 KB tiles followed by a tail under 64 KB, cut into
/// segments of 2^i x 4 KB, largest first (the binary digits of the tail). Tile t of every lane
/// lies in row t, [t * WS * 64 KB, (t + 1) * WS * 64 KB), at the lane's slot; after the rows of
/// tiles, one row per tail segment size, WS segments each, again at the lanes' slots. Every
/// tile and segment stays contiguous and aligned to its size, and the layout is a bijection
/// between the lanes' padded bytes and [0, region_bytes()).
///
/// Failure contract: a layout for 0 or more than 32 lanes, or more than max_lane_bytes per
/// lane, is empty; offset_of returns no_offset and locate no_lane outside the layout.
class WarpLayout {
 public:
  static constexpr std::uint32_t no_lane = ~std::uint32_t{0};
  static constexpr std::uint64_t max_lane_bytes = std::uint64_t{1} << 48;

  WARPVM_HD constexpr WarpLayout(std::uint32_t lanes, std::uint64_t bytes_per_lane,
                                 LaneOrder order = LaneOrder::lane_id)
      : order_(order) {
    if (lanes == 0 || lanes > warp_lanes || bytes_per_lane > max_lane_bytes) return;
    lanes_ = lanes;
    lane_bytes_ = (bytes_per_lane + small_segment_bytes - 1) / small_segment_bytes * small_segment_bytes;
  }

  [[nodiscard]] WARPVM_HD constexpr std::uint32_t lanes() const { return lanes_; }
  [[nodiscard]] WARPVM_HD constexpr LaneOrder order() const { return order_; }
  /// Bytes each lane may address: its request rounded up to 4 KB.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t lane_bytes() const { return lane_bytes_; }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t region_bytes() const { return lanes_ * lane_bytes_; }
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t full_tiles() const { return lane_bytes_ / basic_block_bytes; }
  /// The lane's bytes after its last whole tile: a sum of distinct 2^i x 4 KB segments.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t tail_bytes() const { return lane_bytes_ % basic_block_bytes; }

  /// Where byte `offset` of `lane`'s data lies in the region, or no_offset. For the tiles this
  /// is Eq. 1 and 2: OB = OF / 64 KB and UVM = User + (OB x WS + Lane - OB) x 64 KB, with
  /// User = region + OF and the lane's slot for Lane.
  [[nodiscard]] WARPVM_HD constexpr std::uint64_t offset_of(std::uint32_t lane, std::uint64_t offset) const {
    if (lane >= lanes_ || offset >= lane_bytes_) return no_offset;
    const std::uint64_t slot = slot_of_lane(lane, lanes_, order_);
    const std::uint64_t tile = offset / basic_block_bytes;
    if (tile < full_tiles()) return offset + (tile * lanes_ + slot - tile) * basic_block_bytes;
    std::uint64_t row = full_tiles() * lanes_ * basic_block_bytes;
    std::uint64_t rest = offset - full_tiles() * basic_block_bytes;
    std::uint64_t segment = basic_block_bytes / 2;
    for (; rest >= (tail_bytes() & segment); segment /= 2) {
      rest -= tail_bytes() & segment;
      row += lanes_ * (tail_bytes() & segment);
    }
    return row + slot * segment + rest;
  }

  /// The lane and byte of that lane's data at `region_offset`: the inverse of offset_of, with
  /// no_lane outside the region.
  [[nodiscard]] WARPVM_HD constexpr LaneByte locate(std::uint64_t region_offset) const {
    if (region_offset >= region_bytes()) return {no_lane, 0};
    const std::uint64_t tiles_end = full_tiles() * lanes_ * basic_block_bytes;
    if (region_offset < tiles_end) {
      const std::uint64_t block = region_offset / basic_block_bytes;
      return {lane_at_slot(static_cast<std::uint32_t>(block % lanes_), lanes_, order_),
              block / lanes_ * basic_block_bytes + region_offset % basic_block_bytes};
    }
    std::uint64_t rest = region_offset - tiles_end;
    std::uint64_t lane_offset = full_tiles() * basic_block_bytes;
    std::uint64_t segment = basic_block_bytes / 2;
    for (; rest >= lanes_ * (tail_bytes() & segment); segment /= 2) {
      rest -= lanes_ * (tail_bytes() & segment);
      lane_offset += tail_bytes() & segment;
    }
    return {lane_at_slot(static_cast<std::uint32_t>(rest / segment), lanes_, order_), lane_offset + rest % segment};
  }

 private:
  std::uint32_t lanes_ = 0;
  std::uint64_t lane_bytes_ = 0;
  LaneOrder order_;
};

}  // namespace warpvm::detail
