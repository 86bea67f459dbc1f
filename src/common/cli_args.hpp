#pragma once
// Command-line value parsing shared by the project's tools (warpvm-bench, warpvm-sim).

#include "warpvm/detail/multi_gpu/space_view.hpp"

#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::tools {

/// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

/// "16GiB", "512MiB", "4KiB", "4096" (also G, M, K) -> bytes. Throws std::invalid_argument.
inline std::uint64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  const std::string unit = text.substr(used);
  double scale = 1.0;
  if (unit == "GiB" || unit == "G") scale = double(1ull << 30);
  else if (unit == "MiB" || unit == "M") scale = double(1ull << 20);
  else if (unit == "KiB" || unit == "K") scale = 1024.0;
  else if (!unit.empty() && unit != "B") throw std::invalid_argument("unknown size unit in '" + text + "'");
  return static_cast<std::uint64_t>(value * scale);
}

/// --initial-placement's value: "host" (std::nullopt: pages start there), "blocks" or
/// "interleaved". Throws std::invalid_argument naming the value otherwise.
inline std::optional<Spread> parse_initial_placement(const std::string& value) {
  if (value == "host") return std::nullopt;
  for (const Spread s : {Spread::blocks, Spread::interleaved})
    if (value == to_string(s)) return s;
  throw std::invalid_argument("--initial-placement must be host, blocks or interleaved, not '" + value + "'");
}

/// What a record of a run placed on the GPUs appends to its policy: "_gpu_<spread>" (the report
/// keys placement cases by it), nothing for data that starts on the host.
inline std::string initial_placement_suffix(std::optional<Spread> spread) {
  return spread ? std::string("_gpu_") + to_string(*spread) : std::string();
}

}  // namespace warpvm::tools
