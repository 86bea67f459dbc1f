#include "fuzz_run.hpp"

#include "warpvm/detail/core/geometry.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <ctime>
#include <sstream>
#include <stdexcept>

namespace warpvm::fuzz {
namespace {

/// Throws the failure `what` happened `when` if `problems` is not empty.
void expect_none(const std::string& problems, const std::string& when) {
  if (!problems.empty()) throw std::runtime_error(when + ": " + problems);
}

void compare_digests(const std::vector<std::uint64_t>& got, const std::vector<std::uint64_t>& expected,
                     std::uint32_t launch) {
  if (got.size() != expected.size())
    throw std::runtime_error("launch " + std::to_string(launch) + ": " + std::to_string(got.size()) +
                             " digests for " + std::to_string(expected.size()) + " threads");
  std::uint64_t wrong = 0, first = 0;
  for (std::uint64_t t = got.size(); t-- > 0;)
    if (got[t] != expected[t]) {
      ++wrong;
      first = t;
    }
  if (wrong != 0)
    throw std::runtime_error("launch " + std::to_string(launch) + ": " + std::to_string(wrong) + " of " +
                             std::to_string(got.size()) + " threads saw other values than the model (first: thread " +
                             std::to_string(first) + ")");
}

void expect_empty(const CacheSnapshot& cache, const std::string& when) {
  for (std::uint32_t f = 0; f < cache.owners.size(); ++f)
    if (cache.owners[f] != detail::empty_page_key)
      throw std::runtime_error(when + ": frame " + std::to_string(f) + " still holds a page");
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream out;
  out.precision(6);
  out << v;
  return out.str();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

void run_protocol(const RunConfig& config, ReferenceModel& model, Backend& backend, SeedResult& result) {
  std::array<Placement, object_count> placed = config.placements[0];
  for (std::uint32_t launch = 0; launch < config.launches(); ++launch) {
    const std::string after = "after launch " + std::to_string(launch);
    for (std::uint32_t o = 0; o < object_count; ++o)
      if (config.placements[launch][o] != placed[o] && backend.set_placement(o, config.placements[launch][o]))
        placed[o] = config.placements[launch][o];
    const Program program = config.program(launch);
    const auto started = std::chrono::steady_clock::now();
    const std::vector<std::uint64_t> digests = backend.launch(program);
    result.launch_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    compare_digests(digests, model.run_launch(launch), launch);
    expect_none(check_cache(config, model, backend.snapshot(), false), after);
    if (launch + 1 == config.launches()) break;
    const Boundary boundary = config.boundaries[launch];
    const std::string when = after + " and " + to_string(boundary);
    if (boundary == Boundary::flush || boundary == Boundary::host_write) {
      backend.flush();
      expect_none(check_cache(config, model, backend.snapshot(), true), when);
    }
    if (boundary == Boundary::host_write) {
      for (const HostWrite& w : model.host_writes(launch))
        std::memcpy(backend.host(w.object).data() + w.offset, model.bytes(w.object).data() + w.offset, w.bytes);
    }
    if (boundary == Boundary::host_write || boundary == Boundary::drop) {
      backend.drop_cached();
      const CacheSnapshot dropped = backend.snapshot();
      expect_empty(dropped, when);
      expect_none(check_cache(config, model, dropped, true), when);
    }
  }
  backend.flush();
  expect_none(check_cache(config, model, backend.snapshot(), true), "after the final flush");
  result.exact = true;
  result.bytes_moved = backend.bytes_moved();
  result.pages_in = backend.pages_in();
}

std::string reproducer(const std::string& program, const std::string& backend, const RunConfig& config) {
  return program + " --backend " + backend + " --grid " + to_string(config.grid) + " --seed " + std::to_string(config.seed);
}

std::string record_json(const RunConfig& config, const SeedResult& result, const RecordContext& context) {
  const bool timed = context.backend == "gpu";
  const double seconds = result.launch_seconds;
  const double gbps = timed && seconds > 0 ? static_cast<double>(result.bytes_moved) / seconds / 1e9 : NAN;
  std::ostringstream out;
  out << "{\"suite\":\"fuzz\",\"workload\":\"fuzz\",\"mode\":" << json_string(context.backend)
      << ",\"policy\":" << json_string(warpvm::to_string(config.shape.eviction))
      << ",\"cache_fraction\":" << json_number(1.0 / config.shape.oversubscription)
      << ",\"dataset_bytes\":" << config.data_bytes() << ",\"useful_bytes\":" << result.bytes_moved
      << ",\"seconds\":" << (timed ? json_number(seconds) : "null") << ",\"useful_gbps\":" << json_number(gbps)
      << ",\"faults\":" << result.pages_in << ",\"bytes_moved\":" << result.bytes_moved
      << ",\"device\":" << json_string(context.device) << ",\"driver\":" << json_string(context.driver)
      << ",\"commit\":" << json_string(context.commit) << ",\"date\":" << json_string(utc_now())
      << ",\"seeds\":1,\"seed\":" << config.seed << ",\"grid\":" << json_string(to_string(config.grid))
      << ",\"cell\":" << config.cell << ",\"exact\":" << (result.exact ? "true" : "false")
      << ",\"verified\":" << (result.exact ? "true" : "false") << ",\"simulated\":" << (timed ? "false" : "true")
      << ",\"page_bytes\":" << config.shape.page_bytes << ",\"oversubscription\":" << config.shape.oversubscription
      << ",\"threads\":" << config.threads << ",\"block\":" << config.block
      << ",\"pages_held_per_thread\":" << config.holds << ",\"frames\":" << config.frames
      << ",\"launches\":" << config.launches() << ",\"steps\":" << config.steps
      << ",\"wall_seconds\":" << json_number(result.wall_seconds)
      << ",\"link_gbps\":" << (context.link_gbps > 0 ? json_number(context.link_gbps) : "null")
      << ",\"failure\":" << json_string(result.failure) << ",\"reproduce\":" << json_string(context.reproduce) << "}";
  return out.str();
}

}  // namespace warpvm::fuzz
