#pragma once
/// @file
/// Fault-batch records: what one batch of the host_batched transport (or of UVM's model in the
/// simulator) did and, on a GPU, how long it took. The columns of the batch traces that
/// `warpvm trace` analyses (docs/tracing.md).

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace warpvm {

struct FaultBatch {
  std::uint32_t faults = 0;            ///< entries taken from the fault buffer
  std::uint32_t unique_faults = 0;     ///< after duplicates were dropped
  std::uint32_t blocks = 0;            ///< 2 MB VA blocks serviced
  std::uint32_t pages_faulted = 0;     ///< pages migrated because they faulted
  std::uint32_t pages_prefetched = 0;  ///< pages migrated by the prefetcher
  std::uint32_t chunks_evicted = 0;
  std::uint32_t pages_evicted = 0;     ///< resident pages copied back with evicted chunks
  std::uint32_t faults_flushed = 0;    ///< entries dropped from the buffer after the batch (they fault again)
  std::uint64_t start_ns = 0;          ///< GPU runs: batch start, from the first batch of the run
  std::uint64_t duration_ns = 0;       ///< GPU runs: service time, fetch to replay
  std::uint64_t transfer_ns = 0;       ///< GPU runs: the part spent copying (the rest is management)
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
         "pages_prefetched,chunks_evicted,pages_evicted,start_ns,duration_ns,transfer_ns,faults_flushed\n";
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
      out << b.start_ns << ',' << b.duration_ns << ',' << b.transfer_ns << ',' << b.faults_flushed << '\n';
    else
      out << ",,," << '\n';
  }
}

}  // namespace warpvm
