#pragma once
/// @file
/// OASIS-InMem's shadow map (the paper's Section IV-E): the object id of every segment (one page)
/// of a space's flat addresses, so that an access by raw address finds its object, and with it
/// the object's O-Table entry, without the id in the pointer's upper bits. Two levels, as in the
/// paper: a root of leaf pointers, and leaves of `shadow_leaf_entries` ids each, made only where
/// objects lie. The lookup is host/device code with no CUDA runtime calls; ShadowMap keeps the
/// host's copy and hands out the addresses (multi_gpu.cu uploads the leaves it changes to each GPU).

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/host_device.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::detail::mg {

inline constexpr unsigned shadow_leaf_shift = 12;
inline constexpr std::uint64_t shadow_leaf_entries = std::uint64_t{1} << shadow_leaf_shift;
/// What a segment of no object holds (and what a lookup outside every object returns).
inline constexpr std::uint32_t no_object = ~std::uint32_t{0};

/// One copy of the map (in a GPU's memory, or the host's): `leaves[i]` covers segments
/// [i, i + 1) * shadow_leaf_entries, null where no object ever lay.
struct ShadowMapView {
  const std::uint32_t* const* leaves = nullptr;
  std::uint64_t leaf_count = 0;
  PageGeometry segments{0};  ///< one entry per page of the space
};

/// The id of the object whose flat addresses hold `address`, or no_object.
[[nodiscard]] WARPVM_HD_INLINE std::uint32_t shadow_lookup(const ShadowMapView& map, std::uint64_t address) {
  const std::uint64_t segment = map.segments.page_of(address), leaf = segment >> shadow_leaf_shift;
  if (leaf >= map.leaf_count) return no_object;
  const std::uint32_t* entries = map.leaves[leaf];
  return entries == nullptr ? no_object : entries[segment & (shadow_leaf_entries - 1)];
}

/// The host's copy of the map, and the flat addresses' allocator: each object gets whole
/// segments after every earlier object's, never reused (a stale address of a freed object finds
/// no object rather than a newer one), starting one segment in so that 0 is no address.
class ShadowMap {
 public:
  /// Room for `address_bytes` of flat addresses (rounded up to whole leaves).
  ShadowMap(std::uint64_t address_bytes, unsigned segment_shift)
      : segments_{segment_shift},
        leaves_((segments_.page_of(address_bytes) + shadow_leaf_entries - 1) >> shadow_leaf_shift),
        roots_(leaves_.size(), nullptr) {}
  // A copy's roots would point at the original's leaves; a move keeps them (vectors move their buffers).
  ShadowMap(const ShadowMap&) = delete;
  ShadowMap& operator=(const ShadowMap&) = delete;
  ShadowMap(ShadowMap&&) noexcept = default;
  ShadowMap& operator=(ShadowMap&&) noexcept = default;

  /// The first leaf and one past the last that [base, base + bytes) touches.
  struct LeafRange {
    std::uint64_t first = 0, end = 0;
  };

  /// Flat addresses for the `bytes` of object `id`: their first. Throws std::length_error when
  /// the addresses are spent.
  std::uint64_t assign(std::uint32_t id, std::uint64_t bytes) {
    const std::uint64_t segments = segments_.pages_for(bytes);
    if (segments > capacity_segments() - next_segment_)
      throw std::length_error("the space's flat addresses are spent (" + std::to_string(capacity_segments() - next_segment_) +
                              " segments left, " + std::to_string(segments) + " asked)");
    const std::uint64_t first = next_segment_;
    next_segment_ += segments;
    fill(first, segments, id);
    return segments_.page_begin(first);
  }

  /// The object at [base, base + bytes) is gone: its segments name no object.
  void clear(std::uint64_t base, std::uint64_t bytes) { fill(segments_.page_of(base), segments_.pages_for(bytes), no_object); }

  [[nodiscard]] LeafRange leaves_of(std::uint64_t base, std::uint64_t bytes) const {
    const std::uint64_t first = segments_.page_of(base), last = segments_.page_of(base + (bytes == 0 ? 1 : bytes) - 1);
    return {first >> shadow_leaf_shift, (last >> shadow_leaf_shift) + 1};
  }
  /// Leaf `i`'s entries (empty if no object ever lay there).
  [[nodiscard]] const std::vector<std::uint32_t>& leaf(std::uint64_t i) const { return leaves_.at(i); }
  [[nodiscard]] std::uint64_t leaf_count() const { return leaves_.size(); }
  /// The host copy as a view (valid while the map lives: leaves are made once and never move).
  [[nodiscard]] ShadowMapView view() const { return {roots_.data(), roots_.size(), segments_}; }

 private:
  [[nodiscard]] std::uint64_t capacity_segments() const { return leaves_.size() << shadow_leaf_shift; }
  void fill(std::uint64_t first, std::uint64_t segments, std::uint32_t id) {
    for (std::uint64_t s = first; s < first + segments; ++s) {
      std::vector<std::uint32_t>& leaf = leaves_[s >> shadow_leaf_shift];
      if (leaf.empty()) {
        leaf.assign(shadow_leaf_entries, no_object);
        roots_[s >> shadow_leaf_shift] = leaf.data();
      }
      leaf[s & (shadow_leaf_entries - 1)] = id;
    }
  }

  PageGeometry segments_;
  std::uint64_t next_segment_ = 1;  // segment 0 stays empty: address 0 is no object's
  std::vector<std::vector<std::uint32_t>> leaves_;
  std::vector<const std::uint32_t*> roots_;
};

}  // namespace warpvm::detail::mg
