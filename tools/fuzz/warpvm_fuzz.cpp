// warpvm-fuzz: the seeded differential fuzzer (docs/fuzz.md). Each seed is a run of random
// programs on the GPU (--backend gpu) or the CPU simulator (--backend sim), checked bit for bit
// against a host reference model, with the cache's invariants checked after every launch. One
// JSON Lines record per seed; a failing seed prints its reproducer command. Exit code: 0 when
// every seed was exact, 1 when one was not, 2 for a bad option, 3 for --backend gpu without a GPU.

#include "cli.hpp"
#include "fuzz_gpu.hpp"
#include "fuzz_sim.hpp"

#include "warpvm/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace warpvm::fuzz;

constexpr int no_gpu_exit = 3;

struct Options {
  std::string backend = "gpu";
  Grid grid = Grid::full;
  std::uint64_t seeds = 100;
  std::uint64_t first_seed = 0;
  std::optional<std::uint64_t> seed;  ///< one seed only (a reproducer)
  std::string out = "-";
  double time_limit = 0;  ///< seconds after which no new seed starts; 0: none
  unsigned jobs = 1;
  std::string commit = "unknown";
  std::string driver = "unknown";
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"warpvm-fuzz: seeded differential fuzzing of the page cache (docs/fuzz.md). One JSON Lines record\n"
               "per seed; a failure prints the seed and the command that reproduces it.",
               "warpvm-fuzz"};
  app.add_option("--backend", o.backend, "gpu: warpvm::Runtime on device 0; sim: the CPU simulator")
      ->check(CLI::IsMember({"gpu", "sim"}));
  app.add_option_function<std::string>(
      "--grid",
      [&o](const std::string& name) {
        if (!parse_grid(name, o.grid)) throw CLI::ValidationError("--grid", "choose ci, quick or full, not '" + name + "'");
      },
      "configurations: ci (small, for the simulator), quick, full");
  app.add_option("--seeds", o.seeds, "seeds to run: first-seed .. first-seed + seeds - 1")->check(CLI::Range(1ull, 1ull << 40));
  app.add_option("--first-seed", o.first_seed, "the first seed");
  app.add_option("--seed", o.seed, "run this one seed only (what a failure's reproducer gives)");
  app.add_option("--out", o.out, "JSON Lines file to append to ('-': stdout)");
  app.add_option("--time-limit", o.time_limit, "seconds after which no new seed starts (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--jobs", o.jobs, "seeds run at once, each with a runtime of its own (timings then share the link)")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--commit", o.commit, "commit, for the records");
  app.add_option("--driver", o.driver, "driver version, for the records");
  warpvm::cli::parse(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const bool gpu = options.backend == "gpu";
  RecordContext context{options.backend, "cpu-simulator", options.driver, options.commit, 0, ""};
  if (gpu) {
    if (warpvm::device_count() == 0) {
      std::fprintf(stderr, "warpvm-fuzz: no CUDA device visible (--backend sim runs the simulator)\n");
      return no_gpu_exit;
    }
    context.device = gpu_name();
    context.link_gbps = measure_link_gbps();
    std::fprintf(stderr, "warpvm-fuzz: %s, pinned host to device %.1f GB/s\n", context.device.c_str(), context.link_gbps);
  }

  std::ofstream file;
  if (options.out != "-") {
    file.open(options.out, std::ios::app);
    if (!file) {
      std::fprintf(stderr, "warpvm-fuzz: cannot write %s\n", options.out.c_str());
      return 2;
    }
  }
  std::ostream& records = options.out == "-" ? std::cout : file;

  const std::uint64_t first = options.seed.value_or(options.first_seed);
  const std::uint64_t count = options.seed ? 1 : options.seeds;
  const std::string program = argv[0];
  const auto started = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> next{0}, exact{0}, failed{0}, run{0};
  std::mutex output;
  const auto worker = [&] {
    for (std::uint64_t n = next++; n < count; n = next++) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (options.time_limit > 0 && elapsed > options.time_limit) return;
      const RunConfig config = make_run(first + n, options.grid);
      const SeedResult result = run_seed(config, [&](const ReferenceModel& model) {
        return gpu ? make_gpu_backend(config, model) : make_sim_backend(config, model);
      });
      RecordContext here = context;
      here.reproduce = reproducer(program, options.backend, config);
      const std::lock_guard lock(output);
      ++run;
      (result.exact ? exact : failed)++;
      records << record_json(config, result, here) << std::endl;
      if (!result.exact)
        std::fprintf(stderr, "FAIL seed %llu (%s): %s\n  reproduce: %s\n",
                     static_cast<unsigned long long>(config.seed), config.describe().c_str(), result.failure.c_str(),
                     here.reproduce.c_str());
    }
  };
  std::vector<std::thread> workers;
  for (unsigned j = 1; j < options.jobs; ++j) workers.emplace_back(worker);
  worker();
  for (std::thread& w : workers) w.join();

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::fprintf(stderr, "warpvm-fuzz: %llu of %llu seeds run in %.1f s (%s backend, %s grid): %llu exact, %llu failed%s\n",
               static_cast<unsigned long long>(run.load()), static_cast<unsigned long long>(count), seconds,
               options.backend.c_str(), to_string(options.grid), static_cast<unsigned long long>(exact.load()),
               static_cast<unsigned long long>(failed.load()),
               run.load() < count ? " (the time limit stopped the rest)" : "");
  return failed.load() == 0 ? 0 : 1;
}
