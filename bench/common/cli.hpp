#pragma once
/// @file
/// The one flag parser of warpvm's programs (the benchmarks and warpvm-sim): CLI11, plus the
/// value types they share: sizes ("16GiB"), comma-separated lists, initial placements, and one
/// exit convention (--help: 0; a bad option or value: the message, then exit code 2).

#include "warpvm/detail/multi_gpu/space_view.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::cli {

/// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

/// "16GiB", "512MiB", "4KiB", "4096" (also G, M, K, B; fractions such as 1.5GiB) -> bytes.
/// @throws std::invalid_argument on anything else.
inline std::uint64_t parse_bytes(const std::string& text) {
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  const std::string unit = text.substr(used);
  double scale = 1.0;
  if (unit == "GiB" || unit == "G") scale = double(1ull << 30);
  else if (unit == "MiB" || unit == "M") scale = double(1ull << 20);
  else if (unit == "KiB" || unit == "K") scale = 1024.0;
  else if (!unit.empty() && unit != "B") throw std::invalid_argument("unknown size unit in '" + text + "'");
  if (value < 0) throw std::invalid_argument("negative size '" + text + "'");
  return static_cast<std::uint64_t>(value * scale);
}

/// An option whose value is a size written as parse_bytes reads it.
inline CLI::Option* add_bytes(CLI::App& app, const std::string& name, std::uint64_t& bytes, const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [&bytes, name](const std::string& text) {
            try {
              bytes = parse_bytes(text);
            } catch (const std::logic_error&) {
              throw CLI::ValidationError(name, "not a size: '" + text + "' (e.g. 16GiB, 512MiB, 4KiB, 4096)");
            }
          },
          help)
      ->type_name("SIZE");
}

/// An option taking a comma-separated list of sizes ("512,1KiB,2MiB"); given, it replaces the default.
inline CLI::Option* add_bytes_list(CLI::App& app, const std::string& name, std::vector<std::uint64_t>& sizes,
                                   const std::string& help) {
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          [&sizes, name](const std::vector<std::string>& texts) {
            sizes.clear();
            for (const std::string& text : texts) {
              try {
                sizes.push_back(parse_bytes(text));
              } catch (const std::logic_error&) {
                throw CLI::ValidationError(name, "not a size: '" + text + "'");
              }
            }
          },
          help)
      ->delimiter(',')
      ->type_name("SIZES");
}

/// warpvm's page sizes: a power of two from 512 B to 2 MiB (Config::page_bytes).
inline CLI::Option* add_page_bytes(CLI::App& app, std::uint64_t& bytes, const std::string& help) {
  return app
      .add_option_function<std::string>(
          "--page-bytes",
          [&bytes](const std::string& text) {
            std::uint64_t value = 0;
            try {
              value = parse_bytes(text);
            } catch (const std::logic_error&) {
            }
            if (value < 512 || value > (2u << 20) || (value & (value - 1)) != 0)
              throw CLI::ValidationError("--page-bytes", "must be a power of two from 512 B to 2 MiB, not '" + text + "'");
            bytes = value;
          },
          help)
      ->type_name("SIZE");
}

/// Accepts the entries of a ", "-separated list such as a benchmark's "mvt, atax, bicg".
inline CLI::IsMember one_of(const std::string& list) {
  std::vector<std::string> names;
  for (const std::string& name : split_list(list)) names.push_back(name.substr(name.find_first_not_of(' ')));
  return CLI::IsMember(names);
}

/// Accepts a fraction in (0, 1] (a cache size as a share of the footprint).
inline const CLI::Validator unit_fraction(
    [](const std::string& text) {
      double f = 0;
      return CLI::detail::lexical_cast(text, f) && f > 0 && f <= 1 ? std::string() : "must be in (0, 1], not '" + text + "'";
    },
    "(0, 1]");

/// An option taking a comma-separated list ("a,b,c"); given, it replaces the default. Empty
/// entries name nothing ("a,,b" is a and b; "" is the empty list).
template <class T>
CLI::Option* add_list(CLI::App& app, const std::string& name, std::vector<T>& values, const std::string& help) {
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          [&values, name](const std::vector<std::string>& texts) {
            values.clear();
            for (const std::string& text : texts) {
              if (text.empty()) continue;
              T value{};
              if (!CLI::detail::lexical_cast(text, value)) throw CLI::ConversionError(name, "cannot read '" + text + "'");
              values.push_back(value);
            }
          },
          help)
      ->delimiter(',')
      ->type_name("LIST");
}

/// Parses the command line. --help prints the usage and exits 0; an unknown option or a value
/// that does not parse or validate prints the message (and where to find the usage) and exits 2.
inline void parse(CLI::App& app, int argc, char** argv) {
  // A flag given twice takes its last value (the CLI passes some flags, and users may repeat them).
  for (CLI::Option* option : app.get_options())
    if (option->get_items_expected_max() == 1) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    std::exit(app.exit(help));
  } catch (const CLI::ParseError& error) {
    app.exit(error);
    std::exit(2);
  }
}

/// Refuses a combination of values that each parsed (checked after parse()), as a parse error
/// would: the message on stderr, exit code 2.
[[noreturn]] inline void refuse(const CLI::App& app, const std::string& message) {
  std::cerr << app.get_name() << ": " << message << "\nRun with --help for more information.\n";
  std::exit(2);
}

/// --initial-placement's value: "host" (std::nullopt: pages start there), "blocks" or
/// "interleaved". @throws std::invalid_argument naming the value otherwise.
inline std::optional<Spread> parse_initial_placement(const std::string& value) {
  if (value == "host") return std::nullopt;
  for (const Spread s : {Spread::blocks, Spread::interleaved})
    if (value == to_string(s)) return s;
  throw std::invalid_argument("--initial-placement must be host, blocks or interleaved, not '" + value + "'");
}

/// --initial-placement as an option: host, blocks or interleaved.
inline CLI::Option* add_initial_placement(CLI::App& app, std::optional<Spread>& spread) {
  return app
      .add_option_function<std::string>(
          "--initial-placement",
          [&spread](const std::string& value) {
            try {
              spread = parse_initial_placement(value);
            } catch (const std::invalid_argument& e) {
              throw CLI::ValidationError("--initial-placement", e.what());
            }
          },
          "where the pages start: host, or placed on the GPUs (blocks, interleaved) before the timed runs")
      ->type_name("host|blocks|interleaved");
}

/// What a record of a run placed on the GPUs appends to its policy: "_gpu_<spread>" (the report
/// keys placement cases by it), nothing for data that starts on the host.
inline std::string initial_placement_suffix(std::optional<Spread> spread) {
  return spread ? std::string("_gpu_") + to_string(*spread) : std::string();
}

}  // namespace warpvm::cli
