#pragma once
// warpvm-channel-bench's measurements: each workload (workloads/include/warpvm/workloads/channel/)
// run in every mode it has, warm-up first, then --repeats times, and turned into JSON Lines
// records: the timings' medians, the waiting metrics, the monitors' counters and the workload's
// own fields; --timeline appends each mode's last run's warp stamps to a CSV.

#include "harness.cuh"
#include "warpvm/workloads/channel/cpu_harness.cuh"
#include "warpvm/workloads/channel/gpu_pair.cuh"
#include "warpvm/workloads/channel/timeline_csv.hpp"

#include "warpvm/channel.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {

using workloads::add_served;
using workloads::CpuToGpuHarness;
using workloads::CpuToGpuWorkload;
using workloads::GpuPair;
using workloads::mode_name;
using workloads::pair_gpus;
using workloads::pair_gpus_missing;
using workloads::pair_mode_missing;
using workloads::PairDescription;
using workloads::PairWorkload;
using workloads::RunTiming;
using workloads::timeline_csv_header;
using workloads::WaitMode;
using workloads::write_timeline_csv;

/// The bench's settings: the workloads' sizes and settings, and where the timelines go.
struct Setup : workloads::ChannelSetup {
  /// Non-empty: every mode's last measured run's warp timelines are appended to this CSV
  /// (write_timeline_csv, docs/bench/channel.md, "Metrics").
  std::string timeline_csv;
};

/// The channel-only fields of a record (docs/bench/channel.md, "Metrics"), from the monitors' work
/// during the measured runs; `monitor_seconds`: the kernels' time times the number of monitors.
inline void describe_monitor(Record& r, const ChannelStats& served, double monitor_seconds) {
  const double requests = static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
  const double passes = static_cast<double>(std::max<std::uint64_t>(served.passes, 1));
  r.extra["monitor_passes_per_request"] = static_cast<double>(served.passes) / requests;
  r.extra["batches_per_request"] = static_cast<double>(served.batches) / requests;
  r.extra["copies_per_request"] = static_cast<double>(served.copies) / requests;
  r.extra["answer_stalls_per_pass"] = static_cast<double>(served.answer_stalls) / passes;
  r.extra["largest_batch"] = served.largest_batch;
  r.extra["serving_us_per_pass"] = served.serving_seconds * 1e6 / passes;
  r.extra["copy_call_us_per_pass"] = served.copy_call_seconds * 1e6 / passes;
  r.extra["answer_stall_us_per_pass"] = served.answer_stall_seconds * 1e6 / passes;
  // The monitor thread's busy time against the kernels' time (docs/bench/channel.md: overhead).
  r.extra["monitor_busy_share"] = served.serving_seconds / monitor_seconds;
  r.extra["monitor_copy_call_share"] = served.copy_call_seconds / monitor_seconds;
}

/// --timeline: appends `t`'s warp timelines to `setup.timeline_csv` as run `run` (the header
/// first into an empty file).
inline void append_timeline(const Setup& setup, const std::string& run, const RunTiming& t) {
  if (setup.timeline_csv.empty()) return;
  std::ofstream out(setup.timeline_csv, std::ios::app | std::ios::ate);  // ate: tellp() is the file's size
  if (out.tellp() == 0) out << timeline_csv_header;
  write_timeline_csv(out, run, t.timelines);
  if (!out) throw std::runtime_error("cannot write the timeline to " + setup.timeline_csv);
}

/// Speedups over naive polling and against the best baseline (every mode but the channel ones),
/// where those modes ran.
inline void add_speedups(std::vector<Record>& records) {
  double naive = 0, best_baseline = 0;
  for (const Record& r : records) {
    const double sec = median(r.seconds);
    if (r.mode == "naive") naive = sec;
    const bool channel_mode = r.mode == "channel" || r.mode == "channel_direct" || r.mode == "channel_warp";
    if (!channel_mode) best_baseline = best_baseline == 0 ? sec : std::min(best_baseline, sec);
  }
  for (Record& r : records) {
    const double sec = median(r.seconds);
    if (naive > 0) r.extra["speedup_vs_naive"] = naive / sec;
    if (best_baseline > 0) r.extra["time_vs_best_baseline"] = sec / best_baseline;
  }
}

/// One record per mode of one workload; the speedups are filled in once every mode ran.
inline std::vector<Record> measure(CpuToGpuWorkload& w, const Setup& setup, int sms, const std::vector<WaitMode>& modes,
                                   int repeats, bool& all_verified) {
  CpuToGpuHarness harness(w, setup, sms);
  std::vector<Record> records;
  for (const WaitMode mode : modes) {
    bool verified = harness.run(mode, false, false).verified;  // warm-up, checked too
    Record r;
    r.workload = w.name();
    r.mode = mode_name(mode);
    r.cache_fraction = 1;
    r.dataset_bytes = r.useful_bytes = w.buffer_bytes();
    r.bytes_moved = static_cast<std::int64_t>(r.dataset_bytes);
    std::vector<double> spans, shares, overlaps, waited, streams, computes, producers, publishes;
    std::vector<double> compute_warps_beside, compute_warps_alone;
    ChannelStats served{};  // the monitor's work during the measured runs with both sides
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = harness.channel_stats();
      const RunTiming both = harness.run(mode, false, false);
      if (rep == repeats - 1)
        append_timeline(setup, std::string(w.name()) + "-" + std::to_string(w.consumer_warps(mode) * 32) + "-" +
                                   mode_name(mode),
                        both);
      producers.push_back(both.producer_s);
      publishes.push_back(both.publish_us);
      add_served(served, before, harness.channel_stats());
      verified = verified && both.verified;
      r.seconds.push_back(both.seconds);
      spans.push_back(both.span_s);
      compute_warps_beside.push_back(both.compute_warp_s);
      shares.push_back(both.waits.wait_share);
      overlaps.push_back(both.waits.overlap_efficiency);
      waited.push_back(both.waits.wait_seconds);
      const RunTiming stream = harness.run(mode, true, false);
      verified = verified && stream.verified;
      streams.push_back(stream.span_s);
      const RunTiming compute_alone = harness.run(mode, false, true);
      computes.push_back(compute_alone.span_s);
      compute_warps_alone.push_back(compute_alone.compute_warp_s);
    }
    if (!verified) std::fprintf(stderr, "warpvm-channel-bench: %s/%s: WRONG RESULTS (seed %llu)\n", w.name(),
                                r.mode.c_str(), static_cast<unsigned long long>(setup.seed));
    all_verified = all_verified && verified;
    r.verified = verified;
    r.extra = w.fields();  // the workload's own fields; the measured ones follow
    const double total = median(spans), stream = median(streams), compute = median(computes);
    double kernel_seconds = 0;
    for (const double sec : r.seconds) kernel_seconds += sec;
    r.extra["seed"] = static_cast<double>(setup.seed);
    r.extra["consumer_blocks"] = w.consumer_blocks(mode);
    r.extra["consumer_threads"] = w.consumer_warps(mode) * 32.0;
    r.extra["compute_blocks"] = harness.compute_blocks();
    r.extra["compute_iters"] = setup.compute_iters;
    r.extra["span_s"] = total;
    r.extra["t_stream_s"] = stream;
    r.extra["t_compute_s"] = compute;
    // What the consumers cost the warps that compute beside them (the paper's consumer-side
    // overhead, seen from the other warps): their mean life beside the consumers over alone.
    if (median(compute_warps_alone) > 0)
      r.extra["compute_slowdown"] = median(compute_warps_beside) / median(compute_warps_alone);
    r.extra["producer_s"] = median(producers);
    r.extra["producer_cpu"] = setup.producer_cpu;
    if (mode == WaitMode::channel) r.extra["monitor_cpu"] = setup.monitor_cpu;
    r.extra["publish_us"] = median(publishes);
    // The first slice's whole-run measure: how much of the shorter side disappears when both run.
    r.extra["span_overlap_efficiency"] = std::clamp((stream + compute - total) / std::min(stream, compute), 0.0, 1.0);
    r.extra["overlap_efficiency"] = median(overlaps);
    r.extra["wait_share"] = median(shares);
    r.extra["wait_s"] = median(waited);
    if (mode == WaitMode::channel) describe_monitor(r, served, kernel_seconds);
    records.push_back(std::move(r));
  }
  add_speedups(records);
  return records;
}

/// A GPU-to-GPU workload's records, one per mode that GPUs 0 and 1 can run (none, saying why,
/// without two peer GPUs). `make` builds the workload for the modes that run.
inline std::vector<Record> measure_gpu_pair(
    const char* workload, const Setup& setup, const std::vector<WaitMode>& wanted, int repeats, bool& all_verified,
    const std::function<std::unique_ptr<PairWorkload>(const std::vector<WaitMode>&)>& make) {
  if (const std::string missing = pair_gpus_missing(); !missing.empty()) {
    std::fprintf(stderr, "warpvm-channel-bench: %s skipped: %s\n", workload, missing.c_str());
    return {};
  }
  std::vector<WaitMode> modes;
  for (const WaitMode mode : wanted) {
    if (const std::string missing = pair_mode_missing(mode); !missing.empty())
      std::fprintf(stderr, "warpvm-channel-bench: %s/%s skipped: %s\n", workload, mode_name(mode), missing.c_str());
    else
      modes.push_back(mode);
  }
  if (modes.empty()) return {};
  const std::unique_ptr<PairWorkload> runner = make(modes);
  const GpuPair& gpus = runner->gpus();
  // A kernel launched for the first time behind a running monitor kernel never started on 2 x
  // H200 (with EAGER module loading too); once launched before, it starts (docs/channels.md, "The
  // monitor warp"). So the workload's kernels run once, untimed and unchecked, before any monitor.
  if (std::find(modes.begin(), modes.end(), WaitMode::channel_warp) != modes.end())
    (void)runner->run(WaitMode::peer_flag);
  std::vector<Record> records;
  for (const WaitMode mode : modes) {
    std::fprintf(stderr, "%s: %s\n", workload, mode_name(mode));
    bool verified = runner->run(mode).verified;  // warm-up, checked too
    Record r;
    r.workload = workload;
    r.mode = mode_name(mode);
    r.cache_fraction = 1;
    const PairDescription described = runner->describe();
    r.dataset_bytes = described.dataset_bytes;
    r.useful_bytes = described.useful_bytes;
    r.bytes_moved = static_cast<std::int64_t>(described.useful_bytes);
    r.extra = described.fields;  // the workload's own fields; the measured ones follow
    std::vector<double> shares, overlaps, waited;
    ChannelStats served{};
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = gpus.channel_stats();
      const RunTiming t = runner->run(mode);
      if (rep == repeats - 1) append_timeline(setup, std::string(workload) + "-" + mode_name(mode), t);
      add_served(served, before, gpus.channel_stats());
      verified = verified && t.verified;
      r.seconds.push_back(t.seconds);
      shares.push_back(t.waits.wait_share);
      overlaps.push_back(t.waits.overlap_efficiency);
      waited.push_back(t.waits.wait_seconds);
    }
    if (!verified)
      std::fprintf(stderr, "warpvm-channel-bench: %s/%s: WRONG RESULTS (seed %llu)\n", workload, r.mode.c_str(),
                   static_cast<unsigned long long>(setup.seed));
    all_verified = all_verified && verified;
    r.verified = verified;
    double kernel_seconds = 0;
    for (const double sec : r.seconds) kernel_seconds += sec;
    r.extra["seed"] = static_cast<double>(setup.seed);
    r.extra["gpus"] = pair_gpus;
    r.extra["blocks_per_gpu"] = gpus.blocks(0);
    r.extra["us_per_iteration"] = median(r.seconds) * 1e6 / runner->exchanges_run();
    r.extra["wait_share"] = median(shares);
    r.extra["overlap_efficiency"] = median(overlaps);
    r.extra["wait_s"] = median(waited);
    if (mode == WaitMode::channel) {
      describe_monitor(r, served, kernel_seconds * pair_gpus);
      r.extra["map_polls_per_request"] =
          static_cast<double>(served.map_polls) / static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
    } else if (mode == WaitMode::channel_warp) {  // the monitor warps' counters
      r.extra["requests"] = static_cast<double>(served.requests);
      r.extra["monitor_wake_words"] = static_cast<double>(served.passes);  // see ChannelStats
      r.extra["map_polls_per_request"] =
          static_cast<double>(served.map_polls) / static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
      r.extra["direct_buffer_on_consumer"] = gpus.shape().direct_buffer_on_consumer ? 1 : 0;
    } else if (mode == WaitMode::channel_direct) {  // no monitor: the warps' own counters
      r.extra["direct_acquires"] = static_cast<double>(served.direct_acquires);
      r.extra["direct_buffer_on_consumer"] = gpus.shape().direct_buffer_on_consumer ? 1 : 0;
      r.extra["direct_parked_share"] = static_cast<double>(served.direct_parked) /
                                       static_cast<double>(std::max<std::uint64_t>(served.direct_acquires, 1));
    }
    records.push_back(std::move(r));
  }
  add_speedups(records);
  return records;
}

}  // namespace warpvm::bench
