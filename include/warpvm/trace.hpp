#pragma once
/// @file
/// What the fault path records. Fault events: one per warp-level fault (a page a warp had to
/// wait for), written by the device when Config::fault_event_capacity is set. Fault batches:
/// what one batch of the host_batched transport (or of UVM's model in the simulator) did and,
/// on a GPU, how long it took. docs/tracing.md describes both and the files made from them.

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace warpvm {

/// How a warp got a page it did not have.
enum class FaultKind : std::uint8_t {
  fill = 0,  ///< this warp loaded the page (GPU-initiated transfer)
  wait = 1,  ///< another warp was loading it: a duplicate fault, coalesced across warps
  host = 2,  ///< posted to the host_batched service and served by it
};

/// One warp-level fault, as the device records it (40 bytes).
struct FaultEvent {
  std::uint64_t start_ns;  ///< %globaltimer when the warp found the page absent
  std::uint64_t end_ns;    ///< when the page was usable
  std::uint64_t page;      ///< page index within the object
  std::uint32_t object;    ///< object id
  std::uint32_t warp;      ///< global warp index: (block index * warps per block) + warp in block
  std::uint16_t sm;
  std::uint8_t lanes;      ///< lanes of the warp that wanted this page (coalesced into one fault)
  FaultKind kind;
  std::uint8_t write;      ///< 1 when the lanes meant to write
  /// fill: 0 the frame was free, 1 a clean page was evicted, 2 a dirty one was written back;
  /// host: how many times the warp posted (re-posts after flushes), saturating at 255.
  std::uint8_t detail;
  std::uint16_t pad;
};
static_assert(sizeof(FaultEvent) == 40);

struct FaultBatch {
  std::uint32_t faults = 0;            ///< entries taken from the fault buffer
  std::uint32_t unique_faults = 0;     ///< after duplicates were dropped
  std::uint32_t blocks = 0;            ///< 2 MB VA blocks serviced
  std::uint32_t pages_faulted = 0;     ///< pages migrated because they faulted
  std::uint32_t pages_prefetched = 0;  ///< pages migrated by the prefetcher
  std::uint32_t chunks_evicted = 0;
  std::uint32_t pages_evicted = 0;     ///< resident pages given up with evicted chunks
  std::uint32_t faults_flushed = 0;    ///< entries dropped from the buffer after the batch (they fault again)
  std::uint64_t start_ns = 0;          ///< GPU runs: batch start, from the first batch of the run
  std::uint64_t duration_ns = 0;       ///< GPU runs: service time, fetch to replay
  std::uint64_t transfer_ns = 0;       ///< GPU runs: the part spent copying pages in
  /// GPU runs: the part spent waiting for the device to carry out this batch's evictions (the
  /// write-backs and page-state changes); management = duration - transfer - eviction.
  std::uint64_t eviction_ns = 0;
  std::uint32_t pages_written_back = 0;  ///< GPU runs: evicted pages that were dirty and copied back
  /// GPU runs: eviction orders withdrawn (their chunk's pages stayed held; the chunk went back
  /// to the model as resident), counted on the batch that saw the device finish withdrawing.
  std::uint32_t orders_cancelled = 0;
};

/// What a run of batches was, for the trace rows.
struct BatchRun {
  std::string_view workload;
  double cache_fraction = 1.0;
  std::uint32_t batch_limit = 256;
  bool prefetch = true;
  bool timed = false;  ///< GPU runs; simulated runs leave the time columns empty
};

/// The header of a batch trace CSV (docs/tracing.md).
inline void write_batch_trace_header(std::ostream& out) {
  out << "workload,cache_fraction,batch_limit,prefetch,batch,faults,unique_faults,blocks,pages_faulted,"
         "pages_prefetched,chunks_evicted,pages_evicted,start_ns,duration_ns,transfer_ns,faults_flushed,"
         "pages_written_back,eviction_ns,orders_cancelled\n";
}

/// One row per batch of `run`.
template <class Batches>
void write_batch_trace_rows(std::ostream& out, const BatchRun& run, const Batches& batches) {
  std::size_t index = 0;
  for (const FaultBatch& b : batches) {
    out << run.workload << ',' << run.cache_fraction << ',' << run.batch_limit << ',' << (run.prefetch ? 1 : 0) << ','
        << index++ << ',' << b.faults << ',' << b.unique_faults << ',' << b.blocks << ',' << b.pages_faulted << ','
        << b.pages_prefetched << ',' << b.chunks_evicted << ',' << b.pages_evicted << ',';
    if (run.timed)
      out << b.start_ns << ',' << b.duration_ns << ',' << b.transfer_ns << ',' << b.faults_flushed << ','
          << b.pages_written_back << ',' << b.eviction_ns << ',' << b.orders_cancelled << '\n';
    else
      out << ",,,,,," << '\n';
  }
}

inline const char* to_string(FaultKind kind) noexcept {
  switch (kind) {
    case FaultKind::fill: return "fill";
    case FaultKind::wait: return "wait";
    default: return "host";
  }
}

/// The header of a fault event CSV (docs/tracing.md).
inline void write_fault_event_header(std::ostream& out) {
  out << "workload,start_ns,end_ns,object,page,warp,sm,lanes,kind,write,detail\n";
}

/// One row per event; times relative to the earliest start among them.
template <class Events>
void write_fault_event_rows(std::ostream& out, std::string_view workload, const Events& events) {
  std::uint64_t origin = ~std::uint64_t{0};
  for (const FaultEvent& e : events) origin = e.start_ns < origin ? e.start_ns : origin;
  for (const FaultEvent& e : events)
    out << workload << ',' << e.start_ns - origin << ',' << e.end_ns - origin << ',' << e.object << ',' << e.page << ','
        << e.warp << ',' << e.sm << ',' << unsigned{e.lanes} << ',' << to_string(e.kind) << ',' << unsigned{e.write}
        << ',' << unsigned{e.detail} << '\n';
}

}  // namespace warpvm
