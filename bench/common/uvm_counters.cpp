#include "uvm_counters.hpp"

#include <cupti.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace warpvm::bench {
namespace {

constexpr std::size_t buffer_bytes = 8u << 20;
constexpr std::size_t record_alignment = 8;

UvmTraffic collected;  // CUPTI's callbacks have no user pointer; one collection at a time

void check_cupti(CUptiResult status, const char* what) {
  if (status == CUPTI_SUCCESS) return;
  const char* reason = nullptr;
  cuptiGetResultString(status, &reason);
  throw std::runtime_error(std::string("CUPTI ") + what + ": " + (reason != nullptr ? reason : "unknown error"));
}

void CUPTIAPI give_buffer(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(record_alignment, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;  // CUPTI drops records it has no room for
  *max_records = 0;  // as many as fit
}

void CUPTIAPI take_buffer(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) continue;
    const auto* counter = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
    switch (counter->counterKind) {
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD: collected.bytes_to_device += counter->value; break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH: collected.bytes_to_host += counter->value; break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD:
        collected.bytes_between_devices += counter->value;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
        ++collected.gpu_fault_records;
        collected.gpu_fault_groups += counter->value;
        break;
      default: break;
    }
  }
  std::free(buffer);
}

}  // namespace

UvmCounters::UvmCounters() {
  collected = UvmTraffic{};
  constexpr int counted_kinds = 4;
  CUpti_ActivityUnifiedMemoryCounterConfig configs[counted_kinds] = {};
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[counted_kinds] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD, CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT};
  // scope and deviceId are deprecated since CUDA 7.0 and records name their source and destination
  // devices, so the counts are taken to cover every GPU of the process (not yet checked on several).
  for (int k = 0; k < counted_kinds; ++k) {
    configs[k].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
    configs[k].kind = kinds[k];
    configs[k].deviceId = 0;
    configs[k].enable = 1;
  }
  check_cupti(cuptiActivityRegisterCallbacks(give_buffer, take_buffer), "register buffers");
  check_cupti(cuptiActivityConfigureUnifiedMemoryCounter(configs, counted_kinds), "configure unified memory counters");
  check_cupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), "enable unified memory counters");
  running_ = true;
}

UvmCounters::~UvmCounters() {
  if (running_) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
}

UvmTraffic UvmCounters::stop() {
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  check_cupti(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), "disable unified memory counters");
  running_ = false;
  return collected;
}

}  // namespace warpvm::bench
