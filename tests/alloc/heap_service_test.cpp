// The heap's host service without a GPU: requests posted into a ring in host memory as the
// device posts them (heap_device.cuh's heap_post), served by the service thread. A refusal is a
// null reply counted in failed_allocations, and HeapStats::last_refusal says what the request
// needed and what the heap had then.

#include "alloc/heap_service.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace warpvm::detail {
namespace {

constexpr std::uint64_t mib = 1ull << 20;

class Ring {
 public:
  explicit Ring(std::uint32_t segments, std::uint32_t portion_vablocks)
      : slots_(capacity), service_(slots_.data(), capacity, segments, portion_vablocks) {}

  HeapService& service() { return service_; }

  /// Posts an allocation for `lanes` lanes of `lane_units` 16-byte units in a region of
  /// `region_bytes` and waits for the reply: the region's offset, or no_offset.
  std::uint64_t allocate(std::uint64_t region_bytes, std::uint32_t lanes, std::uint32_t lane_units) {
    const std::uint64_t position = post(HeapRequest::allocate, region_bytes, lanes, lane_units);
    HeapSlot& slot = slots_[position % capacity];
    const std::uint64_t replied = heap_slot_header(position, heap_slot_replied);
    while (std::atomic_ref(slot.header).load(std::memory_order_acquire) != replied) std::this_thread::yield();
    const std::uint64_t offset = slot.value;
    std::atomic_ref(slot.header).store(0, std::memory_order_release);
    return offset;
  }
  void release(std::uint64_t offset) {
    post(HeapRequest::release, offset, 0, 0);
    service_.wait_served(next_);
  }

 private:
  static constexpr std::uint32_t capacity = 16;

  std::uint64_t post(HeapRequest kind, std::uint64_t value, std::uint32_t lanes, std::uint32_t lane_units) {
    const std::uint64_t position = next_++;
    HeapSlot& slot = slots_[position % capacity];
    while (std::atomic_ref(slot.header).load(std::memory_order_acquire) != 0) std::this_thread::yield();
    slot.value = value;
    slot.kind = static_cast<std::uint32_t>(kind);
    slot.lanes = lanes;
    slot.lane_units = lane_units;
    std::atomic_ref(slot.header).store(heap_slot_header(position, heap_slot_posted), std::memory_order_release);
    return position;
  }

  std::vector<HeapSlot> slots_;
  HeapService service_;
  std::uint64_t next_ = 0;
};

TEST(HeapService, ARefusalIsCountedWithTheSizesItNeededAndTheHeapsBytes) {
  // 8 MiB: a 2 MiB PortionSpace, a 2 MiB small area, two free segments.
  Ring ring(4, 1);
  ASSERT_NE(ring.service().reserve(2 * mib), no_offset);
  EXPECT_EQ(ring.service().stats().describe_last_refusal(), "no refusal");
  const std::uint64_t large = ring.allocate(4 * mib, 2, 2 * mib / 16);
  ASSERT_NE(large, no_offset);
  const std::uint64_t small = ring.allocate(64 * 1024, 1, 64 * 1024 / 16);  // 128 KiB reserved with its padding
  ASSERT_NE(small, no_offset);

  EXPECT_EQ(ring.allocate(4 * mib, 32, 128 * 1024 / 16), no_offset) << "2 MiB less 128 KiB free";
  HeapStats stats = ring.service().stats();
  EXPECT_EQ(stats.failed_allocations, 32u);
  EXPECT_EQ(stats.allocations, 3u);
  const HeapRefusal& r = stats.last_refusal;
  EXPECT_EQ(r.lanes, 32u);
  EXPECT_EQ(r.lane_bytes, 128u * 1024);
  EXPECT_EQ(r.region_bytes, 4 * mib);
  EXPECT_EQ(r.capacity_bytes, 8 * mib);
  EXPECT_EQ(r.small_area_bytes, 2 * mib);
  EXPECT_EQ(r.reserved_bytes, 4 * mib + 128 * 1024);
  EXPECT_EQ(r.free_bytes, 2 * mib - 128 * 1024);
  EXPECT_EQ(r.small_area_bytes + r.reserved_bytes + r.free_bytes, r.capacity_bytes);
  EXPECT_EQ(r.free_segment_bytes, 0u);
  EXPECT_EQ(stats.describe_last_refusal(),
            "32 threads refused, asking for up to 128.00 KiB (131072 B) each: a region of 4.00 MiB (4194304 B); the "
            "heap of 8.00 MiB (8388608 B) had 2.00 MiB (2097152 B) in its small area, 4.12 MiB (4325376 B) reserved "
            "by live regions and 1.88 MiB (1966080 B) free (0 B of it in whole 2 MiB segments): too little free");

  // Freed, the large region's segments hold a request the free bytes did not; a request over
  // any region's limit is refused with no region size.
  ring.release(large);
  EXPECT_NE(ring.allocate(4 * mib, 32, 128 * 1024 / 16), no_offset);
  EXPECT_EQ(ring.allocate(no_offset, 1, 0), no_offset);
  stats = ring.service().stats();
  EXPECT_EQ(stats.failed_allocations, 33u);
  EXPECT_EQ(stats.last_refusal.lanes, 1u);
  EXPECT_EQ(stats.last_refusal.region_bytes, 0u);
  EXPECT_EQ(stats.describe_last_refusal(),
            "1 thread refused: a request over the 64.00 GiB (68719476720 B) a thread may ask for");

  ring.service().reset_stats();
  EXPECT_EQ(ring.service().stats().last_refusal.lanes, 0u);
}

// Enough bytes free, in no place the region fits: the description says so.
TEST(HeapService, ARefusalWithEnoughFreeBytesSaysNoPlaceFits) {
  Ring ring(3, 1);  // a 2 MiB PortionSpace, two segments
  const std::uint64_t first = ring.allocate(2 * mib, 1, 2 * mib / 16);
  ASSERT_EQ(first, 2 * mib);
  ASSERT_NE(ring.allocate(2 * mib, 1, 2 * mib / 16), no_offset);
  ring.release(first);
  // One free segment and the free PortionSpace: 4 MiB free, no run of two segments.
  EXPECT_EQ(ring.allocate(4 * mib, 2, 2 * mib / 16), no_offset);
  const HeapStats stats = ring.service().stats();
  EXPECT_EQ(stats.last_refusal.free_bytes, 4 * mib);
  EXPECT_EQ(stats.last_refusal.free_segment_bytes, 2 * mib);
  EXPECT_NE(stats.describe_last_refusal().find("enough free, but in no place the region fits"), std::string::npos)
      << stats.describe_last_refusal();
}

}  // namespace
}  // namespace warpvm::detail
