#pragma once
// Shared pieces of the benchmarks: options, pinned host buffers filled in parallel, timing with
// CUDA events (median of repeats after a warm-up), and JSON Lines records (the fields: docs/bench/<suite>.md).

#include "cli.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {

struct Options {
  std::vector<std::string> workloads;  ///< empty = all of the suite
  std::vector<std::string> modes;      ///< empty = all
  std::vector<double> cache_fractions{1.0, 0.5, 0.25, 0.125};
  std::uint64_t dataset_bytes = 16ull << 30;
  int repeats = 3;
  EvictionPolicy eviction = EvictionPolicy::clock;
  /// warpvm_auto: Config::automatic_remote_share of the runs (the library's default unless given).
  double automatic_remote_share = Config{}.automatic_remote_share;
  /// warpvm_auto: Config::automatic_remote_share_evicting of the runs.
  double automatic_remote_share_evicting = Config{}.automatic_remote_share_evicting;
  std::string out = "-";
  std::string commit = "unknown";
  std::string driver = "unknown";
  std::string suite = "paging";
  std::string trace;  ///< batch trace CSV of the uvm-preset runs (empty: none)
  /// Counted (untimed) runs per real-UVM point: UVM's own traffic varies from run to run where
  /// its prefetcher sits on its threshold, so the record keeps the median and every count.
  unsigned uvm_counted_runs = 1;
  std::vector<unsigned> uvm_batch_sizes{256};  ///< warpvm_uvm: fault batch limits to run
  std::vector<bool> uvm_prefetch{true};        ///< warpvm_uvm: prefetcher on and/or off
  bool fault_events = false;  ///< warpvm modes record fault events (needs WARPVM_FAULT_EVENTS)
  std::string events;         ///< fault events of each warpvm point's last run as CSV (empty: none)
  bool wants(const std::string& workload) const;
  bool wants_mode(const std::string& mode) const;
};

/// warpvm-bench's options; prints the usage and exits 2 on a bad one (cli::parse).
Options parse_options(int argc, char** argv);

/// Adds the options every benchmark takes to `app`, stored in `o`: --modes, --cache-fractions,
/// --repeats, --eviction, --out, --commit, --driver, --suite, --trace, --uvm-counted-runs.
void add_shared_options(CLI::App& app, Options& o);

/// Adds --automatic-remote-share, for the benchmarks with a warpvm_auto mode (warpvm-bench, the
/// graph and apps benches).
void add_automatic_option(CLI::App& app, Options& o);

/// A benchmark's main() after its options are parsed: exit code 3 (saying so, then
/// `no_device_hint`) when no CUDA device is visible, 1 (with the message) when `run` throws or
/// wrote a record that failed its check against the reference (Recorder::unverified()), else 0.
/// Messages go to stderr prefixed with `name`.
int bench_main(const char* name, const char* no_device_hint, const std::function<void()>& run);

/// Pinned host memory (cudaHostAlloc, mapped), move-only.
class PinnedArray {
 public:
  explicit PinnedArray(std::uint64_t bytes);
  ~PinnedArray();
  PinnedArray(PinnedArray&& other) noexcept;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

/// Runs body(begin, end) over [0, n) on all host cores.
void parallel_for(std::uint64_t n, const std::function<void(std::uint64_t, std::uint64_t)>& body);
/// Fresh pseudo-random uint32 values (never all zero) from `seed`.
void fill_random(std::uint32_t* data, std::uint64_t n, std::uint64_t seed);
/// Exact sum of n uint32 values.
std::uint64_t host_sum(const std::uint32_t* data, std::uint64_t n);

/// Times `run` with events on `stream`: one warm-up, then `repeats` timed runs; `before` runs
/// untimed ahead of every run (e.g. dropping the cache so each run starts cold). Returns seconds
/// of each timed run.
std::vector<double> time_runs(cudaStream_t stream, int repeats, const std::function<void()>& before,
                              const std::function<void()>& run);
double median(std::vector<double> values);

/// Wall-clock seconds since `start` (host-side phases: generating data, references).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// True when `name` is an entry of `list`, a ", "-separated list (a benchmark's modes or workloads).
bool listed(const char* list, const std::string& name);

/// True when `bytes` of device memory fit in what is free with 512 MiB to spare; else says on
/// stderr ("<bench>: <mode> skipped: ...") that the mode is skipped.
bool fits_on_device(const char* bench_name, const std::string& mode, std::uint64_t bytes);

/// One measured point, written as a JSON Lines record.
struct Record {
  std::string workload, mode, policy = "-";
  double cache_fraction = 0;
  std::uint64_t dataset_bytes = 0, useful_bytes = 0;
  std::vector<double> seconds;
  std::int64_t faults = -1;       ///< -1: not measured for this mode
  std::int64_t bytes_moved = -1;  ///< -1: not measured for this mode
  bool verified = false;
  /// A bound (e.g. the placement suite's `ideal`), not a program's result: there is nothing to
  /// check, so an unverified bound is not counted by Recorder::unverified().
  bool bound = false;
  std::map<std::string, double> extra;  ///< workload-specific numbers
  std::map<std::string, std::vector<double>> lists;  ///< workload-specific series (JSON arrays)
};

class Recorder {
 public:
  explicit Recorder(const Options& options);
  void write(const Record& record);
  /// Records written in this process, by any Recorder, whose result did not match the reference
  /// (bounds not counted).
  static std::uint64_t unverified();

 private:
  const Options& options_;
  std::string device_;
  std::string date_;
};

void check(cudaError_t status, const char* what);

/// Makes `device` current for a scope, then the caller's device again.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~OnDevice() { cudaSetDevice(previous_); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = 0;
};

/// Device memory for `count` T, freed on scope exit.
template <class T>
struct DeviceBuffer {
  T* data = nullptr;
  explicit DeviceBuffer(std::uint64_t count) { check(cudaMalloc(&data, count * sizeof(T)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

/// Managed memory (real UVM), its contents first written on the host; to_host() sends it back
/// there between runs, to_device() prefetches it.
class Managed {
 public:
  explicit Managed(std::uint64_t bytes);
  /// Managed memory holding a copy of `contents` (written on all host cores).
  Managed(const void* contents, std::uint64_t bytes);
  ~Managed();
  Managed(const Managed&) = delete;
  Managed& operator=(const Managed&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void to_host() const;
  void to_device(cudaStream_t stream) const;
  /// Writes `contents` (bytes() of them) over the memory on the host, on all host cores, after
  /// bringing it back there in one bulk prefetch (not one CPU fault per page): the data starts
  /// on the host again, whatever the last run left on the GPUs.
  void assign(const void* contents) const;
  std::uint64_t bytes() const { return bytes_; }

 private:
  void write_on_host(const void* contents) const;

  void* data_ = nullptr;
  std::uint64_t bytes_;
};

/// The uvm preset's cache for these objects: each in whole 2 MB chunks, as UVM places them.
std::uint64_t uvm_cache_bytes(std::initializer_list<std::uint64_t> object_bytes);
/// The uvm preset with `fraction` of uvm_cache_bytes(object_bytes), in whole chunks (at least one).
Config uvm_preset_config(std::initializer_list<std::uint64_t> object_bytes, double fraction);

/// `runs` more runs of a real-UVM point (each: `before` untimed, then `run`) under CUPTI's
/// unified-memory counters, which slow UVM down and so stay off while timing: the median run's
/// bytes and GPU fault records go into the record (`bytes_moved`, `faults`, `uvm_*`), every
/// run's bytes into `uvm_bytes_moved_all`.
void add_uvm_traffic(Record& r, const std::function<void()>& before, const std::function<void()>& run,
                     unsigned runs = 1);

/// A warpvm runtime's counters since reset_stats(), averaged over `runs`, into the record.
void add_paging_stats(Record& r, const Runtime& rt, double runs);

/// The record's policy for a runtime with the uvm preset: "uvm", or what a variant changes
/// ("uvm-batch64-noprefetch").
std::string uvm_policy(const Config& config);

/// One more run of a uvm-preset point (`before` untimed, then `run`): its fault batches, summed,
/// go into the record (batch_limit, prefetch, batches, faults_taken, unique_faults,
/// faults_flushed, pages_prefetched, service_s, transfer_share and per-batch means) and, when
/// `trace` is open, into it as the rows of one run.
void add_batch_summary(Record& r, Runtime& rt, const std::function<void()>& before, const std::function<void()>& run,
                       std::ofstream& trace);

}  // namespace warpvm::bench
