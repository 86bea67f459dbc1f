#pragma once
// NVTX ranges around the runtime's host-side phases (launch, flush, drop, each host_batched
// batch), so that Nsight Systems shows them beside the kernels and copies. NVTX v3 is
// header-only and costs next to nothing when no tool is attached.

#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace warpvm::detail {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  /// A range carrying a number (e.g. the faults of a batch) as its payload.
  NvtxRange(const char* name, std::uint64_t payload) {
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
    attributes.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    attributes.payload.ullValue = payload;
    nvtxRangePushEx(&attributes);
  }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace warpvm::detail
