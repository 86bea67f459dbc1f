#pragma once
// A host model of a whole warpvm::Heap, for replays of device workloads on the CPU: the fast path's
// slabs (small_blocks.hpp's tickets, bindings, live counts and free-slab queue, as heap_device.cuh
// runs them, one warp at a time) in front of the host service's HeapSpace, with heap_malloc's
// grouping of the lanes that reach the host (heap_region_malloc). Sequential: warps are served in
// the order they are given, and a free is done when it is called.

#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/heap_space.hpp"
#include "warpvm/detail/alloc/small_blocks.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace warpvm::detail::replay {

/// What one lane got.
struct Allocation {
  enum class Kind : std::uint8_t { none, small, region, refused };
  Kind kind = Kind::none;
  std::uint32_t where = 0;  ///< small: the slab; region: the model's region index
  std::uint64_t bytes = 0;  ///< what the lane asked for
};

/// The heap's state at one moment, in bytes.
struct HeapBytes {
  std::uint64_t live_requested = 0;   ///< what the live lanes asked for
  std::uint64_t region_reserved = 0;  ///< the space's reservations for regions (HeapStats' reserved_bytes)
  std::uint64_t small_held = 0;       ///< slabs out of the free-slab queue
  std::uint64_t region_space = 0;     ///< the space regions may use: the heap less the small area
};

/// When a slab's freed blocks can be handed out again. when_empty: the device's fast path before
/// slab reuse (tickets hand a slab's blocks out once, in order; the slab goes back to the
/// free-slab queue when its last block is freed). partly_free_fallback: the same tickets, and a
/// lane they cannot serve (no empty slab left) takes a free block of a slab of its class whose
/// tickets are all handed out and some of whose blocks were freed (small_blocks.hpp, "Reuse").
/// partly_free_first, for comparison: a class fills its slabs' free blocks before it takes an
/// empty slab. The model hands out any free block of a slab, as a search of its bitmap would.
enum class SlabReuse : std::uint8_t { when_empty, partly_free_fallback, partly_free_first };

/// A region that does not fit may be refused with up to this much of the space free: the
/// reservation it needs (at most a 2 MB VABlock under 2 MB) has no free aligned place.
inline constexpr std::uint64_t heap_first_fit_slack = vablock_bytes;

class HeapModel {
 public:
  HeapModel(std::uint64_t capacity_bytes, std::uint64_t small_bytes, std::uint64_t portion_bytes, HeapLayout layout,
            SlabReuse reuse = SlabReuse::when_empty)
      : shares_(heap_shares(capacity_bytes, portion_bytes, true, small_bytes)),
        capacity_(capacity_bytes),
        layout_(layout),
        reuse_(reuse),
        storage_(HeapSpace::storage_words(static_cast<std::uint32_t>(capacity_bytes / vablock_bytes))),
        space_(storage_.data(), storage_.size(), static_cast<std::uint32_t>(capacity_bytes / vablock_bytes),
               static_cast<std::uint32_t>(shares_.portion_bytes / vablock_bytes)) {
    // The Heap sets its small area aside first (HeapService::reserve).
    if (shares_.small_bytes != 0) space_.allocate(shares_.small_bytes);
    const auto slabs = static_cast<std::uint32_t>(shares_.small_bytes / slab_bytes);
    slab_live_.assign(slabs, 0);
    slab_class_.assign(slabs, no_small_class);
    listed_in_.assign(slabs, no_small_class);
    for (std::uint32_t slab = 0; slab < slabs; ++slab) free_slabs_.push_back(slab);
    bound_.fill(failed_binding);
  }

  [[nodiscard]] const HeapShares& shares() const { return shares_; }
  [[nodiscard]] HeapBytes bytes() const {
    return {live_requested_, space_.reserved_bytes() - shares_.small_bytes,
            (slab_live_.size() - free_slabs_.size()) * slab_bytes, capacity_ - shares_.small_bytes};
  }

  /// heap_malloc for one warp's calling lanes (at most 32), `out[i]` for `bytes[i]`.
  void allocate_warp(std::span<const std::uint64_t> bytes, std::span<Allocation> out) {
    std::array<std::vector<std::uint32_t>, 33> host_groups;  // heap_region_malloc's classes
    for (std::uint32_t lane = 0; lane < bytes.size(); ++lane) {
      out[lane] = Allocation{Allocation::Kind::none, 0, bytes[lane]};
      if (bytes[lane] == 0) continue;
      if (const std::uint32_t size_class = small_class_of(bytes[lane]); size_class != no_small_class) {
        if (const std::uint32_t slab = take_small_block(size_class); slab != failed_binding) {
          out[lane].kind = Allocation::Kind::small;
          out[lane].where = slab;
          live_requested_ += bytes[lane];
          continue;
        }
      }
      const std::uint64_t units = (bytes[lane] + heap_unit_bytes - 1) / heap_unit_bytes;
      host_groups[std::bit_width(units - 1)].push_back(lane);
    }
    for (const std::vector<std::uint32_t>& group : host_groups)
      if (!group.empty()) allocate_region(bytes, group, out);
  }

  void free(const Allocation& a) {
    if (a.kind == Allocation::Kind::small) {
      live_requested_ -= a.bytes;
      if (reuse_ == SlabReuse::partly_free_first) {
        free_reusable_block(a.where);
      } else if (--slab_live_[a.where] == 0) {
        slab_class_[a.where] = no_small_class;
        free_slabs_.push_back(a.where);
      } else if (reuse_ == SlabReuse::partly_free_fallback && handed_out(a.where)) {
        list_partly_free(a.where);
      }
    } else if (a.kind == Allocation::Kind::region) {
      live_requested_ -= a.bytes;
      if (--regions_[a.where].lanes_live == 0) {
        space_.release(regions_[a.where].offset);
        unused_regions_.push_back(a.where);
      }
    }
  }

  std::uint64_t refused_lanes = 0;
  std::uint64_t small_fallbacks = 0;  ///< small lanes the slabs could not serve (they went to the host path)
  /// The first refused request's region, and the heap's bytes then.
  std::uint64_t first_refused_region_bytes = 0;
  HeapBytes at_first_refusal{};

 private:
  struct Region {
    std::uint64_t offset;
    std::uint32_t lanes_live;
  };

  /// small_malloc for one lane: its ticket, binding its virtual slab when it is the first.
  std::uint32_t take_small_block(std::uint32_t size_class) {
    if (reuse_ == SlabReuse::partly_free_first) return take_reusable_block(size_class);
    const SmallTicket ticket = small_ticket(tickets_[size_class]++, size_class);
    const std::uint32_t blocks = small_blocks_per_slab(size_class);
    if (ticket.block == 0) {
      bound_[size_class] = failed_binding;
      if (!free_slabs_.empty()) {
        bound_[size_class] = free_slabs_.front();
        free_slabs_.pop_front();
        slab_live_[bound_[size_class]] = blocks;
        slab_class_[bound_[size_class]] = size_class;
      }
    }
    const std::uint32_t slab = bound_[size_class];
    if (slab != failed_binding) {
      // The last ticket of a slab whose blocks were freed meanwhile lists it.
      if (reuse_ == SlabReuse::partly_free_fallback && ticket.block + 1 == blocks && slab_live_[slab] < blocks)
        list_partly_free(slab);
      return slab;
    }
    if (reuse_ == SlabReuse::partly_free_fallback) {
      if (const std::uint32_t reused = take_partly_free_block(size_class); reused != failed_binding) return reused;
    }
    ++small_fallbacks;
    return failed_binding;
  }

  /// Whether every block of `slab`'s binding has been handed out by its tickets.
  [[nodiscard]] bool handed_out(std::uint32_t slab) const {
    const std::uint32_t size_class = slab_class_[slab];
    return bound_[size_class] != slab || tickets_[size_class] % small_blocks_per_slab(size_class) == 0;
  }

  /// Lists `slab` for its class, unless it is on that class's list already.
  void list_partly_free(std::uint32_t slab) {
    if (listed_in_[slab] == slab_class_[slab]) return;
    listed_in_[slab] = slab_class_[slab];
    partly_free_[slab_class_[slab]].push_back(slab);
  }

  /// The front of `size_class`'s list, taken off it.
  std::uint32_t take_listed(std::uint32_t size_class) {
    const std::uint32_t slab = partly_free_[size_class].front();
    partly_free_[size_class].pop_front();
    if (listed_in_[slab] == size_class) listed_in_[slab] = no_small_class;
    return slab;
  }

  /// SlabReuse::partly_free_fallback: a free block of a listed slab of the class.
  std::uint32_t take_partly_free_block(std::uint32_t size_class) {
    const std::uint32_t blocks = small_blocks_per_slab(size_class);
    while (!partly_free_[size_class].empty()) {
      const std::uint32_t slab = take_listed(size_class);
      if (slab_class_[slab] != size_class || slab_live_[slab] == 0 || !handed_out(slab) || slab_live_[slab] == blocks)
        continue;  // given back or bound since, or no block free
      if (++slab_live_[slab] < blocks) list_partly_free(slab);
      return slab;
    }
    return failed_binding;
  }

  /// SlabReuse::partly_free_first: a block of the class's current slab, else of a partly free slab of
  /// the class, else of an empty slab.
  std::uint32_t take_reusable_block(std::uint32_t size_class) {
    const std::uint32_t capacity = small_blocks_per_slab(size_class);
    std::uint32_t& current = bound_[size_class];
    while (current == failed_binding || slab_live_[current] == capacity) {
      if (!partly_free_[size_class].empty()) {
        current = take_listed(size_class);
        if (slab_class_[current] != size_class) current = failed_binding;  // given back since, now another class's
        continue;
      }
      if (free_slabs_.empty()) {
        current = failed_binding;
        ++small_fallbacks;
        return failed_binding;
      }
      current = free_slabs_.front();
      free_slabs_.pop_front();
      slab_class_[current] = size_class;
      slab_live_[current] = 0;
    }
    ++slab_live_[current];
    return current;
  }

  void free_reusable_block(std::uint32_t slab) {
    const std::uint32_t size_class = slab_class_[slab];
    if (--slab_live_[slab] == 0 && bound_[size_class] != slab) {
      slab_class_[slab] = no_small_class;
      free_slabs_.push_back(slab);
    } else if (bound_[size_class] != slab) {
      list_partly_free(slab);
    }
  }

  void allocate_region(std::span<const std::uint64_t> bytes, const std::vector<std::uint32_t>& group,
                       std::span<Allocation> out) {
    std::uint64_t largest = 0;
    for (const std::uint32_t lane : group)
      largest = std::max(largest, (bytes[lane] + heap_unit_bytes - 1) / heap_unit_bytes * heap_unit_bytes);
    const auto lanes = static_cast<std::uint32_t>(group.size());
    const std::uint64_t region_bytes = heap_region_bytes(layout_, LaneOrder::lane_id, lanes, largest);
    const HeapRegion placed = space_.allocate(region_bytes);
    if (!placed.ok()) {
      if (refused_lanes == 0) {
        first_refused_region_bytes = region_bytes;
        at_first_refusal = this->bytes();
      }
      refused_lanes += lanes;
      for (const std::uint32_t lane : group) out[lane].kind = Allocation::Kind::refused;
      return;
    }
    std::uint32_t index = 0;
    if (unused_regions_.empty()) {
      index = static_cast<std::uint32_t>(regions_.size());
      regions_.emplace_back();
    } else {
      index = unused_regions_.back();
      unused_regions_.pop_back();
    }
    regions_[index] = Region{placed.offset, lanes};
    for (const std::uint32_t lane : group) {
      out[lane].kind = Allocation::Kind::region;
      out[lane].where = index;
      live_requested_ += bytes[lane];
    }
  }

  HeapShares shares_;
  std::uint64_t capacity_;
  HeapLayout layout_;
  SlabReuse reuse_;
  std::vector<std::uint64_t> storage_;
  HeapSpace space_;
  std::array<std::uint64_t, small_classes> tickets_{};
  std::array<std::uint32_t, small_classes> bound_{};
  std::vector<std::uint32_t> slab_live_;
  std::deque<std::uint32_t> free_slabs_;
  // Each slab's class (no_small_class while free); with slab reuse, the classes' lists
  // of partly free slabs (an entry of a slab given back since is stale: checked when taken), and
  // the class whose list a slab is on (so that it is listed once there).
  std::vector<std::uint32_t> slab_class_;
  std::array<std::deque<std::uint32_t>, small_classes> partly_free_;
  std::vector<std::uint32_t> listed_in_;
  std::vector<Region> regions_;
  std::vector<std::uint32_t> unused_regions_;
  std::uint64_t live_requested_ = 0;
};

}  // namespace warpvm::detail::replay
