#include "harness.cuh"

#include "uvm_counters.hpp"
#include "warpvm/workloads/patterns.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace warpvm::bench {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

bool Options::wants(const std::string& workload) const {
  return workloads.empty() || std::find(workloads.begin(), workloads.end(), workload) != workloads.end();
}
bool Options::wants_mode(const std::string& mode) const {
  return modes.empty() || std::find(modes.begin(), modes.end(), mode) != modes.end();
}

void add_shared_options(CLI::App& app, Options& o) {
  cli::add_list(app, "--modes", o.modes, "modes to run (default: all of the benchmark's)");
  cli::add_list(app, "--cache-fractions", o.cache_fractions, "GPU cache sizes as fractions of the footprint");
  app.add_option("--repeats", o.repeats, "timed runs per point (after one warm-up)")->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--eviction", [&o](const std::string& v) { o.eviction = v == "fifo" ? EvictionPolicy::fifo : EvictionPolicy::clock; },
         "victim policy of warpvm's cache")
      ->check(CLI::IsMember({"clock", "fifo"}));
  app.add_option("--out", o.out, "JSON Lines file to append to ('-': stdout)");
  app.add_option("--commit", o.commit, "commit the binaries were built from, for the records");
  app.add_option("--driver", o.driver, "driver version, for the records");
  app.add_option("--suite", o.suite, "the records' suite name");
  app.add_option("--trace", o.trace, "CSV of the uvm-preset runs' fault batches");
  app.add_option("--uvm-counted-runs", o.uvm_counted_runs,
                 "untimed runs per real-UVM point whose traffic CUPTI counts (the median is recorded)");
}

void add_automatic_option(CLI::App& app, Options& o) {
  app.add_option("--automatic-remote-share", o.automatic_remote_share,
                 "warpvm_auto: Config::automatic_remote_share of the runs")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--automatic-remote-share-evicting", o.automatic_remote_share_evicting,
                 "warpvm_auto: Config::automatic_remote_share_evicting of the runs")
      ->check(CLI::Range(0.0, 64.0));
}

Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app{"warpvm-bench: paging micro-benchmarks, JSON Lines out.\n"
               "workloads: stream, vadd, random_page, sparse_read, resident\n"
               "modes: explicit, uvm, uvm_prefetch, zero_copy, warpvm, warpvm_auto (the objects in Placement::automatic), "
               "warpvm_uvm, warpvm_remote, device",
               "warpvm-bench"};
  add_shared_options(app, o);
  add_automatic_option(app, o);
  cli::add_list(app, "--workloads", o.workloads, "workloads to run (default: all)");
  cli::add_bytes(app, "--bytes", o.dataset_bytes, "dataset size");
  cli::add_list(app, "--uvm-batch-sizes", o.uvm_batch_sizes,
                "warpvm_uvm: fault batch limits to run (the SC21 study's Fig. 9)");
  std::vector<std::string> prefetch;
  cli::add_list(app, "--uvm-prefetch", prefetch, "warpvm_uvm: the prefetcher on, off or both (Fig. 14)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--fault-events", o.fault_events, "record fault events in warpvm modes (a WARPVM_FAULT_EVENTS=ON build)");
  app.add_option("--events", o.events,
                 "also write each point's last run of fault events as CSV (warpvm timeline makes a Perfetto trace of it)");
  app.footer(
      "--trace writes the fault batches of the warpvm_uvm runs (the uvm preset) as CSV; warpvm_uvm runs every batch\n"
      "size and prefetch setting given, at cache fraction 1, and at the smaller fractions given in a\n"
      "WARPVM_HOST_BATCHED_EVICTION=ON build (the study's Figs. 12-13).");
  cli::parse(app, argc, argv);
  if (!prefetch.empty()) {
    o.uvm_prefetch.clear();
    for (const std::string& v : prefetch) o.uvm_prefetch.push_back(v == "on");
  }
  if (!o.events.empty()) o.fault_events = true;
  return o;
}

int bench_main(const char* name, const char* no_device_hint, const std::function<void()>& run) {
  if (device_count() == 0) {
    std::fprintf(stderr, "%s: no CUDA device visible; nothing measured%s\n", name, no_device_hint);
    return 3;
  }
  try {
    run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
  if (const std::uint64_t wrong = Recorder::unverified(); wrong != 0) {
    std::fprintf(stderr, "%s: %llu point(s) did not match the reference (\"verified\": false in the records)\n", name,
                 static_cast<unsigned long long>(wrong));
    return 1;
  }
  return 0;
}

PinnedArray::PinnedArray(std::uint64_t bytes) : bytes_(bytes) {
  check(cudaHostAlloc(&data_, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
}
PinnedArray::~PinnedArray() {
  if (data_ != nullptr) cudaFreeHost(data_);
}
PinnedArray::PinnedArray(PinnedArray&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(other.bytes_) {}

void parallel_for(std::uint64_t n, const std::function<void(std::uint64_t, std::uint64_t)>& body) {
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const std::uint64_t chunk = (n + workers - 1) / workers;
  for (unsigned w = 0; w < workers; ++w) {
    const std::uint64_t begin = std::min(n, w * chunk), end = std::min(n, begin + chunk);
    pool.emplace_back([&, begin, end] { body(begin, end); });
  }
  for (auto& t : pool) t.join();
}

void fill_random(std::uint32_t* data, std::uint64_t n, std::uint64_t seed) {
  workloads::fill_random(data, n, seed, parallel_for);
}

std::uint64_t host_sum(const std::uint32_t* data, std::uint64_t n) {
  std::vector<std::uint64_t> partial(64, 0);
  std::atomic<unsigned> next{0};
  parallel_for(n, [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t s = 0;
    for (std::uint64_t i = begin; i < end; ++i) s += data[i];
    partial[next++] = s;
  });
  std::uint64_t total = 0;
  for (auto s : partial) total += s;
  return total;
}

std::vector<double> time_runs(cudaStream_t stream, int repeats, const std::function<void()>& before,
                              const std::function<void()>& run) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int r = -1; r < repeats; ++r) {
    if (before) before();
    check(cudaDeviceSynchronize(), "sync before run");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check(cudaGetLastError(), "run");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (r >= 0) seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return seconds;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

bool listed(const char* list, const std::string& name) {
  return (", " + std::string(list) + ",").find(", " + name + ",") != std::string::npos;
}

bool fits_on_device(const char* bench_name, const std::string& mode, std::uint64_t bytes) {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  const std::uint64_t margin = 512ull << 20;
  if (bytes + margin <= free) return true;
  std::fprintf(stderr, "%s: %s skipped: it needs %.2f GiB of device memory and %.2f GiB are free\n", bench_name,
               mode.c_str(), bytes / double(1ull << 30), free / double(1ull << 30));
  return false;
}

Recorder::Recorder(const Options& options) : options_(options) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  device_ = prop.name;
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  date_ = buf;
}

namespace {
std::atomic<std::uint64_t> unverified_records{0};
}  // namespace

std::uint64_t Recorder::unverified() { return unverified_records.load(); }

void Recorder::write(const Record& r) {
  if (!r.verified && !r.bound) ++unverified_records;
  const double t = median(r.seconds);
  std::ostringstream line;
  line.precision(9);
  line << "{\"suite\":\"" << json_escape(options_.suite) << "\",\"workload\":\"" << r.workload << "\",\"mode\":\""
       << r.mode << "\",\"policy\":\"" << r.policy << "\",\"cache_fraction\":" << r.cache_fraction
       << ",\"dataset_bytes\":" << r.dataset_bytes << ",\"useful_bytes\":" << r.useful_bytes << ",\"seconds\":" << t
       << ",\"useful_gbps\":" << (t > 0 ? r.useful_bytes / t / 1e9 : 0.0) << ",\"faults\":";
  if (r.faults >= 0) line << r.faults; else line << "null";
  line << ",\"bytes_moved\":";
  if (r.bytes_moved >= 0) line << r.bytes_moved; else line << "null";
  line << ",\"verified\":" << (r.verified ? "true" : "false") << ",\"repeats\":" << r.seconds.size()
       << ",\"seconds_all\":[";
  for (std::size_t i = 0; i < r.seconds.size(); ++i) line << (i ? "," : "") << r.seconds[i];
  line << "]";
  for (const auto& [key, value] : r.extra) line << ",\"" << key << "\":" << value;
  for (const auto& [key, values] : r.lists) {
    line << ",\"" << key << "\":[";
    for (std::size_t i = 0; i < values.size(); ++i) line << (i ? "," : "") << values[i];
    line << "]";
  }
  line << ",\"device\":\"" << json_escape(device_) << "\",\"driver\":\"" << json_escape(options_.driver)
       << "\",\"commit\":\"" << json_escape(options_.commit) << "\",\"date\":\"" << date_ << "\"}";
  if (options_.out == "-") {
    std::cout << line.str() << std::endl;
  } else {
    std::ofstream(options_.out, std::ios::app) << line.str() << '\n';
  }
  std::fprintf(stderr, "%-12s %-14s cache=%-6.3f %9.4f s  %8.2f GB/s useful  %s\n", r.workload.c_str(),
               r.mode.c_str(), r.cache_fraction, t, t > 0 ? r.useful_bytes / t / 1e9 : 0.0,
               r.verified ? "verified" : "NOT VERIFIED");
}

Managed::Managed(std::uint64_t bytes) : bytes_(bytes) { check(cudaMallocManaged(&data_, bytes_), "cudaMallocManaged"); }

Managed::Managed(const void* contents, std::uint64_t bytes) : Managed(bytes) { write_on_host(contents); }

void Managed::write_on_host(const void* contents) const {
  parallel_for(bytes_, [&](std::uint64_t lo, std::uint64_t hi) {
    std::memcpy(static_cast<char*>(data_) + lo, static_cast<const char*>(contents) + lo, hi - lo);
  });
}

void Managed::assign(const void* contents) const {
  to_host();
  check(cudaStreamSynchronize(nullptr), "prefetch to host");  // to_host's stream: the host writes wait for it
  write_on_host(contents);
}

Managed::~Managed() { cudaFree(data_); }

void Managed::to_host() const {
  check(cudaMemPrefetchAsync(data_, bytes_, cudaMemLocation{cudaMemLocationTypeHost, 0}, 0, nullptr), "prefetch to host");
}

void Managed::to_device(cudaStream_t stream) const {
  check(cudaMemPrefetchAsync(data_, bytes_, cudaMemLocation{cudaMemLocationTypeDevice, 0}, 0, stream),
        "prefetch to device");
}

std::uint64_t uvm_cache_bytes(std::initializer_list<std::uint64_t> object_bytes) {
  constexpr std::uint64_t chunk = 2ull << 20;
  std::uint64_t bytes = 0;
  for (const std::uint64_t b : object_bytes) bytes += (b + chunk - 1) / chunk * chunk;
  return bytes;
}

Config uvm_preset_config(std::initializer_list<std::uint64_t> object_bytes, double fraction) {
  constexpr std::uint64_t chunk = 2ull << 20;
  Config config = Config::preset(Preset::uvm);
  const auto chunks = static_cast<std::uint64_t>(static_cast<double>(uvm_cache_bytes(object_bytes) / chunk) * fraction);
  config.cache_bytes = std::max<std::uint64_t>(chunks, 1) * chunk;
  return config;
}

void add_uvm_traffic(Record& r, const std::function<void()>& before, const std::function<void()>& run,
                     unsigned runs) {
  std::vector<UvmTraffic> counted;
  for (unsigned i = 0; i < std::max(runs, 1u); ++i) {
    before();
    check(cudaDeviceSynchronize(), "before the counted UVM run");
    UvmCounters counters;
    run();
    check(cudaDeviceSynchronize(), "the counted UVM run");
    counted.push_back(counters.stop());
  }
  const auto moved = [](const UvmTraffic& t) { return t.bytes_to_device + t.bytes_to_host + t.bytes_between_devices; };
  std::vector<double> all;
  for (const UvmTraffic& t : counted) all.push_back(static_cast<double>(moved(t)));
  std::sort(counted.begin(), counted.end(), [&](const UvmTraffic& a, const UvmTraffic& b) { return moved(a) < moved(b); });
  const UvmTraffic& traffic = counted[(counted.size() - 1) / 2];  // the lower median: a run that happened
  r.bytes_moved = static_cast<std::int64_t>(moved(traffic));
  r.faults = static_cast<std::int64_t>(traffic.gpu_fault_records);
  r.extra["uvm_bytes_to_device"] = static_cast<double>(traffic.bytes_to_device);
  r.extra["uvm_bytes_to_host"] = static_cast<double>(traffic.bytes_to_host);
  r.extra["uvm_bytes_between_devices"] = static_cast<double>(traffic.bytes_between_devices);
  r.extra["uvm_fault_groups"] = static_cast<double>(traffic.gpu_fault_groups);
  r.lists["uvm_bytes_moved_all"] = std::move(all);
}

void add_paging_stats(Record& r, const Runtime& rt, double runs) {
  const Stats st = rt.stats();
  r.faults = static_cast<std::int64_t>(st.misses / runs);
  r.bytes_moved = static_cast<std::int64_t>(st.bytes_moved() / runs);
  r.extra["evictions"] = st.evictions / runs;
  r.extra["writebacks"] = st.writebacks / runs;
  r.extra["cache_bytes"] = static_cast<double>(rt.cache_bytes());
}

std::string uvm_policy(const Config& config) {
  const Config preset = Config::preset(Preset::uvm);
  std::string policy = "uvm";
  if (config.fault_batch_size != preset.fault_batch_size) policy += "-batch" + std::to_string(config.fault_batch_size);
  if (config.prefetch != preset.prefetch) policy += config.prefetch ? "-prefetch" : "-noprefetch";
  return policy;
}

void add_batch_summary(Record& r, Runtime& rt, const std::function<void()>& before, const std::function<void()>& run,
                       std::ofstream& trace) {
  before();
  rt.clear_fault_batches();
  run();
  const std::vector<FaultBatch> batches = rt.fault_batches();
  double faults = 0, unique = 0, flushed = 0, prefetched = 0, duration = 0, transfer = 0;
  for (const FaultBatch& b : batches) {
    faults += b.faults;
    unique += b.unique_faults;
    flushed += b.faults_flushed;
    prefetched += b.pages_prefetched;
    duration += static_cast<double>(b.duration_ns);
    transfer += static_cast<double>(b.transfer_ns);
  }
  const Config& config = rt.config();
  const double count = static_cast<double>(batches.size());
  r.extra["batch_limit"] = config.fault_batch_size;
  r.extra["prefetch"] = config.prefetch ? 1 : 0;
  r.extra["batches"] = count;
  r.extra["faults_taken"] = faults;
  r.extra["unique_faults"] = unique;
  r.extra["faults_per_batch"] = batches.empty() ? 0 : faults / count;
  r.extra["unique_faults_per_batch"] = batches.empty() ? 0 : unique / count;
  r.extra["faults_flushed"] = flushed;
  r.extra["pages_prefetched"] = prefetched;
  r.extra["service_s"] = duration * 1e-9;
  r.extra["transfer_share"] = duration > 0 ? transfer / duration : 0;
  if (trace.is_open())
    write_batch_trace_rows(trace, BatchRun{r.workload, r.cache_fraction, config.fault_batch_size, config.prefetch, true},
                           batches);
}

}  // namespace warpvm::bench
