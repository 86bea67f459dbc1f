#pragma once
// Real UVM's own traffic, from CUPTI's unified-memory counters: bytes migrated each way (and from
// GPU to GPU) and GPU page-fault groups, collected around one run (the counters slow UVM down, so
// timed runs go without them).

#include <cstdint>

namespace warpvm::bench {

struct UvmTraffic {
  std::uint64_t bytes_to_device = 0;
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_between_devices = 0;  ///< migrations from one GPU to another (multi-GPU runs)
  std::uint64_t gpu_fault_records = 0;  ///< CUPTI records: one per faulting page per fault batch
  std::uint64_t gpu_fault_groups = 0;   ///< the records' values: page-fault groups for their pages
};

/// Collects UVM counters between construction and stop(). One at a time per process.
class UvmCounters {
 public:
  UvmCounters();
  ~UvmCounters();
  UvmCounters(const UvmCounters&) = delete;
  UvmCounters& operator=(const UvmCounters&) = delete;
  /// Flushes CUPTI's buffers and returns what was counted since construction.
  UvmTraffic stop();

 private:
  bool running_ = false;
};

}  // namespace warpvm::bench
