#pragma once
/// @file
/// The frames set aside for Placement::resident objects (Config::resident_bytes): runs of
/// contiguous frames taken first-fit, one frame per page of an object, and given back when the
/// object leaves. Host bookkeeping only; the device sees each object's first frame.

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>

namespace warpvm::detail {

class FrameRanges {
 public:
  /// No frames.
  FrameRanges() = default;
  /// The frames [first, first + count), all free.
  FrameRanges(std::uint32_t first, std::uint32_t count) {
    if (count != 0) free_.emplace(first, count);
  }

  /// Takes `n` (> 0) contiguous free frames, the lowest run that is long enough; returns the
  /// first, or nothing when no run is.
  [[nodiscard]] std::optional<std::uint32_t> take(std::uint32_t n) {
    for (auto run = free_.begin(); run != free_.end(); ++run) {
      if (run->second < n) continue;
      const std::uint32_t first = run->first;
      const std::uint32_t left = run->second - n;
      free_.erase(run);
      if (left != 0) free_.emplace(first + n, left);
      return first;
    }
    return std::nullopt;
  }

  /// Gives back [first, first + n), taken before; joins it to free neighbours.
  void give_back(std::uint32_t first, std::uint32_t n) {
    auto next = free_.lower_bound(first);
    if (next != free_.end() && first + n == next->first) {
      n += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      const auto previous = std::prev(next);
      if (previous->first + previous->second == first) {
        previous->second += n;
        return;
      }
    }
    free_.emplace(first, n);
  }

  [[nodiscard]] std::uint64_t free_frames() const {
    std::uint64_t total = 0;
    for (const auto& [first, n] : free_) total += n;
    return total;
  }
  [[nodiscard]] std::uint32_t largest_run() const {
    std::uint32_t largest = 0;
    for (const auto& [first, n] : free_) largest = std::max(largest, n);
    return largest;
  }

 private:
  std::map<std::uint32_t, std::uint32_t> free_;  // first frame -> frames in the run
};

}  // namespace warpvm::detail
