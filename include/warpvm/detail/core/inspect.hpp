#pragma once
/// @file
/// Read-only views of the cache's internals for tests and tools (not part of the stable API).

#include "warpvm/runtime.hpp"

#include <cstdint>
#include <vector>

namespace warpvm::detail {

/// The page key each frame holds (empty_page_key for free frames): the cache's frames (below
/// Runtime::frame_count()), the scratch frame, then Config::resident_bytes's. Synchronizes the device.
std::vector<std::uint64_t> frame_owners(const Runtime& runtime);
/// The page-state word of every page of object `object_id`. Synchronizes the device.
std::vector<std::uint32_t> page_states(const Runtime& runtime, std::uint32_t object_id);
/// Each frame's dirty bit (non-zero: dirty), in frame_owners()'s order. Synchronizes the device.
std::vector<std::uint32_t> frame_dirty_bits(const Runtime& runtime);

/// Test hook that corrupts on purpose: sets page `page` of object `object_id` to the state word
/// `word` (say page_word::busy: a load that never finishes), so that tests can show a stuck wait
/// ends in an error rather than a hang. Synchronizes the device.
void force_page_state(const Runtime& runtime, std::uint32_t object_id, std::uint64_t page, std::uint32_t word);

}  // namespace warpvm::detail
