#pragma once
/// @file
/// The protocol of one fuzz run, the same for every backend (the GPU's Runtime, the simulator):
/// place the objects, launch, compare every thread's digest with the reference model's, check
/// the cache's invariants, do the boundary's host work, and at the end flush and compare every
/// byte. Plus the run's record (one JSON Lines record per seed) and its reproducer command.

#include "fuzz_model.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace warpvm::fuzz {

/// What the protocol needs of a backend. Methods may throw (a warpvm::Error on the GPU): the run
/// then fails with the message.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Sets object o's placement; false when it was refused (resident frames were not free) and
  /// the placement is unchanged.
  virtual bool set_placement(std::uint32_t o, Placement placement) = 0;
  /// Runs one launch of `program` to completion; each thread's digest.
  virtual std::vector<std::uint64_t> launch(const Program& program) = 0;
  virtual CacheSnapshot snapshot() = 0;
  virtual void flush() = 0;
  virtual void drop_cached() = 0;
  /// Object o's host memory (write it only after flush(), and drop_cached() afterwards).
  virtual std::span<std::byte> host(std::uint32_t o) = 0;
  /// Bytes copied into and out of the cache, and pages loaded, since the backend was made.
  virtual std::uint64_t bytes_moved() = 0;
  virtual std::uint64_t pages_in() = 0;
};

struct SeedResult {
  bool exact = false;
  std::string failure;             ///< what differed (empty when exact)
  std::uint64_t bytes_moved = 0;
  std::uint64_t pages_in = 0;
  double launch_seconds = 0;       ///< the launches alone, to completion
  double wall_seconds = 0;         ///< the whole run: setup, launches, checks
};

/// The protocol on a backend made from `model`'s initial bytes.
void run_protocol(const RunConfig& config, ReferenceModel& model, Backend& backend, SeedResult& result);

/// Makes the backend (make_backend(model): its objects filled with the model's initial bytes,
/// placed for launch 0) and runs the protocol. Any exception becomes a failure.
template <class MakeBackend>
SeedResult run_seed(const RunConfig& config, MakeBackend&& make_backend) {
  SeedResult result;
  const auto started = std::chrono::steady_clock::now();
  try {
    ReferenceModel model(config);
    auto backend = make_backend(model);
    run_protocol(config, model, *backend, result);
  } catch (const std::exception& error) {
    result.exact = false;
    result.failure = error.what();
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

/// The command that reruns one seed: `<program> --backend B --grid G --seed S`.
[[nodiscard]] std::string reproducer(const std::string& program, const std::string& backend, const RunConfig& config);

/// Where a record came from.
struct RecordContext {
  std::string backend;  ///< "gpu" or "sim"
  std::string device;
  std::string driver;
  std::string commit;
  double link_gbps = 0;  ///< pinned host to device copy speed (0: not measured)
  std::string reproduce;
};
/// One JSON Lines record for one seed (results.py's required fields, then the fuzzer's own).
[[nodiscard]] std::string record_json(const RunConfig& config, const SeedResult& result, const RecordContext& context);

}  // namespace warpvm::fuzz

