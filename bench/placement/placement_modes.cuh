#pragma once
// What warpvm-placement-bench's modes need besides the harness: the real-UVM modes' advice and
// their in-core check, the paged modes' frame pool and counters into a record, the host's timer
// of a barrier kernel's rounds (--barrier-times), and the stream join that lets events on GPU 0
// time every GPU's work.

#include "harness.cuh"
#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/workloads/multi_gpu/placement_workloads.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace warpvm::bench {

/// The real-UVM modes: managed memory with no advice, ReadMostly on the objects the workload only
/// reads, or AccessedBy every GPU on every object.
enum class UvmAdvice { none, read_mostly, accessed_by };

inline std::optional<UvmAdvice> uvm_advice_of(const std::string& mode) {
  if (mode == "uvm") return UvmAdvice::none;
  if (mode == "uvm_read_mostly") return UvmAdvice::read_mostly;
  if (mode == "uvm_accessed_by") return UvmAdvice::accessed_by;
  return std::nullopt;
}

/// True when `footprint` fits in what each of the first `gpus` GPUs has free (fits_on_device's
/// margin included); else says why on stderr. The uvm modes run in core only: oversubscribed
/// managed memory can hang a GPU, and one GPU may end up holding every page.
inline bool fits_on_every_gpu(unsigned gpus, const std::string& mode, std::uint64_t footprint) {
  bool fits = true;
  for (unsigned g = 0; g < gpus && fits; ++g) {
    check(cudaSetDevice(g), "cudaSetDevice");
    fits = fits_on_device(("warpvm-placement-bench: GPU " + std::to_string(g)).c_str(), mode, footprint);
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  if (!fits)
    std::fprintf(stderr, "warpvm-placement-bench: the uvm modes run in core only (never oversubscribed); lower --bytes\n");
  return fits;
}

/// Gives the driver a uvm mode's advice on the managed objects (after each fill: advice is sticky,
/// so this only repeats it; the fill's host writes have collapsed any read-duplicated copies).
inline void advise(const workloads::multi_gpu::Workload& w, const std::vector<std::unique_ptr<Managed>>& objects,
                   UvmAdvice advice, unsigned gpus) {
  if (advice == UvmAdvice::read_mostly)
    for (const std::size_t i : w.read_only)
      // The location is ignored for ReadMostly.
      check(cudaMemAdvise(objects[i]->as<void>(), objects[i]->bytes(), cudaMemAdviseSetReadMostly,
                          cudaMemLocation{cudaMemLocationTypeDevice, 0}),
            "cudaMemAdvise(SetReadMostly)");
  if (advice == UvmAdvice::accessed_by)
    for (const auto& o : objects)
      for (unsigned g = 0; g < gpus; ++g)
        check(cudaMemAdvise(o->as<void>(), o->bytes(), cudaMemAdviseSetAccessedBy,
                            cudaMemLocation{cudaMemLocationTypeDevice, static_cast<int>(g)}),
              "cudaMemAdvise(SetAccessedBy)");
}

/// Makes GPU 0's stream wait for every other GPU's, so that events on it time the whole phase.
inline void join_streams(const std::vector<cudaStream_t>& streams, const std::vector<cudaEvent_t>& events) {
  for (std::size_t g = 1; g < streams.size(); ++g) {
    check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
    check(cudaEventRecord(events[g], streams[g]), "cudaEventRecord");
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamWaitEvent(streams[0], events[g], 0), "cudaStreamWaitEvent");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
}

/// Each GPU's frame pool in the paged modes. In core (fraction 1): the footprint plus slack, as
/// before --cache-fraction. Oversubscribed: fraction x footprint in whole pages, but at least two
/// frames per warp that can be resident on the smallest of the GPUs: these kernels' warps hold
/// one page at a time (pagerank two: a rank read inside an adjacency span), so at any moment at
/// least half the frames are not held and an eviction's clock finds a victim within a few steps.
inline std::uint64_t pool_bytes_per_gpu(double fraction, std::uint64_t footprint, std::uint64_t page_bytes, unsigned gpus) {
  if (fraction >= 1) return footprint + footprint / 8 + (64ull << 20);
  std::uint64_t resident_warps = ~std::uint64_t{0};
  for (unsigned g = 0; g < gpus; ++g) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, static_cast<int>(g)), "cudaGetDeviceProperties");
    resident_warps = std::min<std::uint64_t>(resident_warps, std::uint64_t(prop.multiProcessorCount) *
                                                                 static_cast<std::uint64_t>(prop.maxThreadsPerMultiProcessor) / 32);
  }
  const auto share = static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(footprint) / static_cast<double>(page_bytes)));
  const std::uint64_t frames = std::max({share, 2 * resident_warps, std::uint64_t{detail::mg::min_pool_frames}});
  return frames * page_bytes;
}

inline void add_stats(Record& r, const GpuPlacementStats& s, double runs) {
  const auto put = [&](const char* k, std::uint64_t v) { r.extra[k] = static_cast<double>(v) / runs; };
  put("local_accesses", s.local_accesses);
  put("remote_accesses", s.remote_accesses);
  put("first_touches", s.first_touches);
  put("shared_faults", s.shared_faults);
  put("migrations", s.migrations);
  put("counter_migrations", s.counter_migrations);
  put("replications", s.replications);
  put("collapses", s.collapses);
  put("remote_maps", s.remote_maps);
  put("invalidations", s.invalidations);
  put("aborted_transitions", s.aborted_transitions);
  put("nvlink_bytes", s.nvlink_bytes);
  put("pcie_bytes", s.pcie_bytes);
  put("evictions", s.evictions);
  put("writebacks", s.writebacks);  // the timed runs do not flush: these are the evictions' write-backs
  r.faults = static_cast<std::int64_t>((s.first_touches + s.shared_faults) / runs);
  r.bytes_moved = static_cast<std::int64_t>((s.nvlink_bytes + s.pcie_bytes) / runs);
}

/// Runs `launch` (a barrier kernel of `rounds` rounds on `space`'s streams) while the host polls
/// the barrier word (on GPU 0) with 4-byte copies on a stream of its own, and the space's
/// counters (stats_now()) whenever the word changed, and prints on stderr, per round, the
/// milliseconds it took and what the GPUs counted in it: a round ends when the word reaches its
/// share of the final count (every block arrives once a round). Times start when `launch`
/// returns (its setup, such as zeroing the word, is not in round 1; the kernels may have begun a
/// little before). Resolution: one poll, a 4-byte copy plus a counter copy per GPU, some tens of
/// us; a round that ended within the poll after another's shows "-" (its time and counts are in
/// that round's), and a round's counts include what the next one did before the poll saw it end.
template <class Launch>
void print_barrier_rounds(const std::string& what, const unsigned* word, std::uint32_t rounds, const MultiGpuSpace& space,
                          Launch&& launch) {
  std::vector<cudaStream_t> streams(space.gpus());
  for (unsigned g = 0; g < space.gpus(); ++g) streams[g] = space.stream(g);
  const OnDevice on_first(0);  // the word's GPU
  const detail::stream_ptr poll = detail::make_stream();
  const detail::pinned_ptr<unsigned> seen = detail::make_pinned_zeroed<unsigned>(1, cudaHostAllocDefault, "barrier poll word");
  struct Sample {
    double ms;  // since the launch
    unsigned count;
    GpuPlacementStats stats;
  };
  std::vector<Sample> samples;
  launch();
  const auto began = std::chrono::steady_clock::now();
  const auto busy = [&] {
    for (cudaStream_t s : streams)
      if (cudaStreamQuery(s) == cudaErrorNotReady) return true;
    return false;
  };
  for (bool running = true; running;) {
    running = busy();  // read before the poll, so that the last poll sees the final count
    check(cudaMemcpyAsync(seen.get(), word, sizeof(unsigned), cudaMemcpyDeviceToHost, poll.get()), "barrier poll");
    check(cudaStreamSynchronize(poll.get()), "barrier poll");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    if (samples.empty() || samples.back().count != *seen) samples.push_back({ms, *seen, space.stats_now().total()});
  }
  for (cudaStream_t s : streams) check(cudaStreamSynchronize(s), "barrier-timed run");
  samples.back().stats = space.stats_now().total();  // every count of the run
  const unsigned per_round = samples.back().count / rounds;
  if (per_round == 0 || samples.back().count % rounds != 0)
    std::fprintf(stderr, "[barrier rounds] %s: the word ended at %u, not a whole number of rounds of %u\n", what.c_str(),
                 samples.back().count, rounds);
  using Field = std::uint64_t GpuPlacementStats::*;
  const struct {
    const char* name;
    Field field;
  } columns[] = {{"shared faults", &GpuPlacementStats::shared_faults},
                 {"migrations", &GpuPlacementStats::migrations},
                 {"replications", &GpuPlacementStats::replications},
                 {"collapses", &GpuPlacementStats::collapses},
                 {"remote maps", &GpuPlacementStats::remote_maps},
                 {"counter migrations", &GpuPlacementStats::counter_migrations}};
  std::vector<std::string> lines(1 + std::size(columns));
  lines[0] = "[barrier rounds] " + what + ": ms";
  for (std::size_t c = 0; c < std::size(columns); ++c) lines[c + 1] = "[barrier rounds] " + what + ": " + columns[c].name;
  Sample last{0, 0, GpuPlacementStats{}};
  std::size_t at = 0;
  bool sampled = false;  // `last` is a sample (not the launch)
  for (std::uint32_t t = 0; t < rounds && per_round > 0; ++t) {
    const std::size_t before = at;
    while (at + 1 < samples.size() && samples[at].count < per_round * (t + 1)) ++at;
    if (sampled && at == before) {  // ended in the same poll as the round before
      for (std::string& l : lines) l += " -";
      continue;
    }
    const Sample& end = samples[at];
    char cell[32];
    std::snprintf(cell, sizeof cell, " %.2f", end.ms - last.ms);
    lines[0] += cell;
    for (std::size_t c = 0; c < std::size(columns); ++c) {
      std::snprintf(cell, sizeof cell, " %llu",
                    static_cast<unsigned long long>(end.stats.*columns[c].field - last.stats.*columns[c].field));
      lines[c + 1] += cell;
    }
    last = end;
    sampled = true;
  }
  for (const std::string& l : lines) std::fprintf(stderr, "%s\n", l.c_str());
}

}  // namespace warpvm::bench
