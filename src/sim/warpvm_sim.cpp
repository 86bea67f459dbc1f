// warpvm-sim: replays the benchmark access patterns through the device cache's own policy code
// (page table, CLOCK/FIFO victim search) on the CPU, at any cache size, and reports faults,
// evictions, write-backs and bytes moved as JSON Lines. No GPU needed; no timings.

#include "cli_args.hpp"
#include "warpvm/sim/page_cache_model.hpp"
#include "warpvm/sim/patterns.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using warpvm::EvictionPolicy;
using warpvm::sim::ModelCounts;
using warpvm::sim::PageCacheModel;

struct Options {
  std::vector<std::string> workloads{"stream", "vadd", "random_page", "hotset"};
  std::vector<double> cache_fractions{1.0, 0.5, 0.25, 0.125};
  std::uint64_t dataset_bytes = 1ull << 30;
  std::uint64_t page_bytes = 4096;
  EvictionPolicy eviction = EvictionPolicy::clock;
  std::string commit = "unknown";
};

[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-sim [--workloads stream,vadd,random_page,hotset] [--bytes 1GiB] "
               "[--cache-fractions 1,0.5,0.25,0.125] [--eviction clock|fifo] [--page-bytes 4096] [--commit SHA]\n"
               "Prints one JSON Lines record per workload and cache size on stdout.\n",
               message.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("warpvm-sim: the paging policy replayed on the CPU");
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--workloads") o.workloads = warpvm::tools::split_list(value);
    else if (flag == "--cache-fractions") {
      o.cache_fractions.clear();
      for (const auto& f : warpvm::tools::split_list(value)) o.cache_fractions.push_back(std::stod(f));
    } else if (flag == "--bytes") o.dataset_bytes = warpvm::tools::parse_bytes(value);
    else if (flag == "--page-bytes") o.page_bytes = warpvm::tools::parse_bytes(value);
    else if (flag == "--eviction") o.eviction = value == "fifo" ? EvictionPolicy::fifo : EvictionPolicy::clock;
    else if (flag == "--commit") o.commit = value;
    else if (flag != "--out") usage("unknown option " + flag);  // --out - is accepted: output is stdout
  }
  return o;
}


struct Replay {
  std::uint64_t useful_bytes;
};

/// Replays `workload` over a dataset of `pages` pages into `model`.
Replay replay(const std::string& workload, PageCacheModel& model, std::uint64_t pages, std::uint64_t page_bytes) {
  auto touch = [&](std::uint32_t object, std::uint64_t page, bool write, bool overwrite) {
    model.acquire(object, page, write, overwrite);
    model.release(object, page);
  };
  if (workload == "stream") {
    const auto a = model.add_object(pages);
    for (std::uint64_t p = 0; p < pages; ++p) touch(a, p, false, false);
    return {pages * page_bytes};
  }
  if (workload == "vadd") {  // C = A + B; A, B and C together make the dataset
    const std::uint64_t each = pages / 3;
    const auto a = model.add_object(each), b = model.add_object(each), c = model.add_object(each);
    for (std::uint64_t p = 0; p < each; ++p) {
      touch(a, p, false, false);
      touch(b, p, false, false);
      touch(c, p, true, true);
    }
    model.flush();  // C ends on the host
    return {3 * each * page_bytes};
  }
  if (workload == "random_page") {
    const auto a = model.add_object(pages);
    const std::uint64_t touches = std::min<std::uint64_t>(pages / 2, 2u << 20);
    for (std::uint64_t k = 0; k < touches; ++k) touch(a, warpvm::sim::touched_page(k, pages), false, false);
    return {touches * page_bytes};
  }
  if (workload == "hotset") {  // 80% of touches on 10% of the pages: where CLOCK beats FIFO
    const auto a = model.add_object(pages);
    const std::uint64_t touches = 4 * pages, hot = std::max<std::uint64_t>(1, pages / 10);
    std::uint64_t x = 88172645463325252ull;
    for (std::uint64_t k = 0; k < touches; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      touch(a, (x % 10 < 8) ? (x >> 8) % hot : (x >> 8) % pages, false, false);
    }
    return {touches * page_bytes};
  }
  usage("unknown workload " + workload);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  const std::uint64_t pages = o.dataset_bytes / o.page_bytes;
  if (pages < 3) usage("--bytes must cover at least three pages");
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  for (const auto& workload : o.workloads) {
    for (double fraction : o.cache_fractions) {
      const auto frames = static_cast<std::uint32_t>(std::max<double>(1, pages * fraction));
      PageCacheModel model(frames, o.eviction);
      const Replay r = replay(workload, model, pages, o.page_bytes);
      const ModelCounts n = model.counts();
      std::cout << "{\"suite\":\"sim\",\"workload\":\"" << workload << "\",\"mode\":\"warpvm_sim\",\"policy\":\""
                << warpvm::to_string(o.eviction) << "\",\"cache_fraction\":" << fraction
                << ",\"dataset_bytes\":" << pages * o.page_bytes << ",\"useful_bytes\":" << r.useful_bytes
                << ",\"seconds\":null,\"useful_gbps\":null,\"faults\":" << n.misses
                << ",\"bytes_moved\":" << (n.loads + n.writebacks) * o.page_bytes << ",\"evictions\":" << n.evictions
                << ",\"writebacks\":" << n.writebacks << ",\"hits\":" << n.hits << ",\"cache_bytes\":"
                << std::uint64_t{frames} * o.page_bytes << ",\"page_bytes\":" << o.page_bytes
                << ",\"simulated\":true,\"verified\":false,\"device\":\"cpu-simulator\",\"driver\":\"-\",\"commit\":\""
                << o.commit << "\",\"date\":\"" << date << "\"}" << std::endl;
    }
  }
  return 0;
}
