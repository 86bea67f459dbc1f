#pragma once
/// @file
/// Graph inputs for the application benchmarks (issue #5), beside the R-MAT generator of
/// rmat.hpp and in the same CSR layout (row offsets uint64, vertices + 1 of them; column indices
/// uint32): a uniform random G(n, m) generator, edge weights for any CSR (graph_reference.hpp's
/// edge_weight), MatrixMarket and edge-list loaders, a binary cache of graphs, and DREAM's
/// Balanced CSR (neighbour lists cut into chunks of at most a fixed number of edges). Host code
/// only.
///
/// @code
///   const warpvm::workloads::UniformParams p{.scale = 20, .seed = 7};
///   std::vector<std::uint64_t> offsets(p.vertices() + 1);
///   std::vector<std::uint32_t> columns(p.directed_edges());
///   warpvm::workloads::build_uniform_csr(p, offsets, columns);                  // as build_rmat_csr
///   auto weights = warpvm::workloads::weights_for(offsets, columns, /*seed=*/7);  // in [1, 255]
///   warpvm::workloads::write_graph_cache("uniform-20.wvg", offsets, columns, weights);
///   warpvm::workloads::CsrGraph g = warpvm::workloads::load_graph_cache("uniform-20.wvg");
///   auto chunks = warpvm::workloads::balance_csr(g.offsets, 32);               // DREAM's Balanced CSR
///   auto firsts = warpvm::workloads::first_chunks(chunks, g.vertices());        // each vertex's chunks
/// @endcode

#include "warpvm/workloads/graph/graph_reference.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace warpvm::workloads {

/// A CSR graph that owns its arrays (what the loaders return). Row v's neighbours are
/// columns[offsets[v] .. offsets[v + 1]), each row sorted by column (then weight).
struct CsrGraph {
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> columns;
  std::vector<std::uint32_t> weights;  ///< empty, or one per entry of `columns`

  [[nodiscard]] std::uint64_t vertices() const { return offsets.size() - 1; }
  [[nodiscard]] std::uint64_t directed_edges() const { return columns.size(); }
  [[nodiscard]] bool has_weights() const { return !weights.empty(); }
};

/// The CSR of an explicit edge list (hand-made graphs, the loaders), with weights if `weighted`.
inline CsrGraph csr_from_edges(std::uint64_t vertices, std::span<const GraphEdge> edges, bool both_ways, bool weighted) {
  const std::uint64_t entries = both_ways ? 2 * edges.size() : edges.size();
  if (vertices > max_graph_vertices)
    throw std::invalid_argument("csr_from_edges: " + std::to_string(vertices) + " vertices; ids must fit 32 bits");
  for (const GraphEdge& e : edges)
    if (e.u >= vertices || e.v >= vertices)
      throw std::invalid_argument("csr_from_edges: edge " + std::to_string(e.u) + " -> " + std::to_string(e.v) +
                                  " names a vertex outside [0, " + std::to_string(vertices) + ")");
  CsrGraph g;
  g.offsets.resize(vertices + 1);
  g.columns.resize(entries);
  if (weighted) g.weights.resize(entries);
  build_csr(vertices, edges.size(), [&](std::uint64_t k) { return edges[k]; }, both_ways, g.offsets, g.columns, g.weights);
  return g;
}

// --- Uniform random graphs -------------------------------------------------------------------

/// A uniform random graph G(n, m): 2^scale vertices, edge_factor x 2^scale undirected edges with
/// both ends drawn uniformly and independently, each stored as two directed edges (duplicates and
/// self-loops stay, as in R-MAT). The same sizes and seed semantics as RmatParams: the graph is a
/// pure function of (scale, edge_factor, seed). No hubs: degrees are about Poisson(2 x edge_factor).
struct UniformParams {
  unsigned scale = 16;
  unsigned edge_factor = 16;
  std::uint64_t seed = 1;

  [[nodiscard]] std::uint64_t vertices() const { return std::uint64_t{1} << scale; }
  [[nodiscard]] std::uint64_t undirected_edges() const { return vertices() * edge_factor; }
  /// Entries of the CSR column array.
  [[nodiscard]] std::uint64_t directed_edges() const { return 2 * undirected_edges(); }
  /// Bytes of the CSR: row offsets (uint64, vertices + 1) and column indices (uint32).
  [[nodiscard]] std::uint64_t csr_bytes() const { return (vertices() + 1) * 8 + directed_edges() * 4; }

  /// Throws std::invalid_argument naming what cannot work.
  void validate() const {
    if (scale < 1 || scale > 31) throw std::invalid_argument("uniform graph scale must be in [1, 31], got " + std::to_string(scale));
    if (edge_factor < 1) throw std::invalid_argument("uniform graph edge factor must be at least 1");
  }
};

/// The graph's undirected edges: edge(k) is the k-th (u, v), both ends from one 64-bit draw.
class UniformEdges {
 public:
  explicit UniformEdges(const UniformParams& p)
      : mask_(p.vertices() - 1),
        // A different stream constant from R-MAT's, so the two graphs of one seed are unrelated.
        stream_(mix64(p.seed) ^ 0x2d358dccaa6c78a5ull) {}

  [[nodiscard]] std::pair<std::uint32_t, std::uint32_t> operator()(std::uint64_t k) const {
    const std::uint64_t bits = mix64(stream_ + k * 0x9e3779b97f4a7c15ull);
    return {static_cast<std::uint32_t>(bits & mask_), static_cast<std::uint32_t>((bits >> 32) & mask_)};
  }

 private:
  std::uint64_t mask_, stream_;
};

/// Writes the uniform graph as CSR, with the contract of build_rmat_csr: `offsets` holds
/// vertices() + 1 entries and `columns` directed_edges(); rows sorted; the same whatever the split.
template <class ParallelFor = SerialFor>
void build_uniform_csr(const UniformParams& p, std::span<std::uint64_t> offsets, std::span<std::uint32_t> columns,
                       ParallelFor&& parallel_for = {}) {
  build_generated_csr<UniformEdges>("build_uniform_csr", p, offsets, columns, std::forward<ParallelFor>(parallel_for));
}

// --- Edge weights ----------------------------------------------------------------------------

/// Deterministic weights for any CSR (generated or loaded), in a new vector aligned with
/// `columns`: graph_reference.hpp's edge_weight, in [1, 255], the same for u -> v and v -> u and a
/// pure function of (seed, u, v). fill_edge_weights writes them into memory the caller owns.
template <class ParallelFor = SerialFor>
std::vector<std::uint32_t> weights_for(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                                       std::uint64_t seed, ParallelFor&& parallel_for = {}) {
  std::vector<std::uint32_t> weights(columns.size());
  fill_edge_weights(offsets, columns, weights, seed, parallel_for);
  return weights;
}

// --- Text loaders ----------------------------------------------------------------------------

/// How the loaders turn a file into a CSR.
struct GraphLoadOptions {
  /// Keep the file's values as weights. False ignores them (e.g. a real-valued matrix with
  /// negative entries, loaded for BFS); a file without values never has weights.
  bool weights = true;
  /// Store every edge both ways, as R-MAT does (a self-loop twice): for a general .mtx or an edge
  /// list that lists each undirected edge once. A symmetric .mtx is already both ways.
  bool undirected = false;
};

/// Text parsing shared by the loaders (not a nested `detail`: see mix64).
namespace graph_text {

/// A file read line by line, which names the file and the line in its errors.
class LineReader {
 public:
  explicit LineReader(const std::filesystem::path& path) : path_(path), in_(path) {
    if (!in_) throw std::runtime_error("cannot open " + path.string() + " (missing or unreadable)");
  }

  /// Moves to the next line; false at the end of the file.
  bool next() {
    if (!std::getline(in_, line_)) {
      if (in_.bad()) throw std::runtime_error("reading " + path_.string() + " failed after line " + std::to_string(number_));
      return false;
    }
    ++number_;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();  // files written on Windows
    return true;
  }

  [[nodiscard]] std::string_view line() const { return line_; }
  [[nodiscard]] std::uint64_t number() const { return number_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_.string() + ":" + std::to_string(number_) + ": " + what);
  }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::string line_;
  std::uint64_t number_ = 0;
};

inline bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/// Splits `line` at blanks into `out`; returns how many fields the line has (more than out.size()
/// when it has more than fit).
template <std::size_t N>
std::size_t split(std::string_view line, std::array<std::string_view, N>& out) {
  std::size_t count = 0, i = 0;
  while (true) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i == line.size()) return count;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (count < N) out[count] = line.substr(start, i - start);
    ++count;
  }
}

/// A line with nothing but blanks, or whose first other character is one of `comment_marks`.
inline bool is_skipped(std::string_view line, std::string_view comment_marks) {
  const auto first = std::find_if_not(line.begin(), line.end(), is_blank);
  return first == line.end() || comment_marks.find(*first) != std::string_view::npos;
}

inline bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return (x | 0x20) == (y | 0x20); });  // ASCII letters only
}

/// A non-negative decimal integer, the whole field.
inline std::uint64_t parse_count(const LineReader& in, std::string_view field, const char* what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (error != std::errc{} || end != field.data() + field.size())
    in.fail(std::string(what) + " '" + std::string(field) + "' is not a non-negative integer");
  return value;
}

/// A weight: an integer, or a real rounded to the nearest integer; in [0, 2^32 - 1].
inline std::uint32_t parse_weight(const LineReader& in, std::string_view field) {
  std::uint64_t integer = 0;
  const char* const last = field.data() + field.size();
  if (const auto [end, error] = std::from_chars(field.data(), last, integer); error == std::errc{} && end == last) {
    if (integer > std::numeric_limits<std::uint32_t>::max())
      in.fail("weight " + std::string(field) + " does not fit 32 bits");
    return static_cast<std::uint32_t>(integer);
  }
  double real = 0;
  const auto [end, error] = std::from_chars(field.data(), last, real);
  if (error != std::errc{} || end != last || !std::isfinite(real))
    in.fail("weight '" + std::string(field) + "' is not a finite number");
  if (real < 0)
    in.fail("weight " + std::string(field) + " is negative (load with weights off to ignore the values)");
  const double rounded = std::nearbyint(real);
  if (rounded > static_cast<double>(std::numeric_limits<std::uint32_t>::max()))
    in.fail("weight " + std::string(field) + " does not fit 32 bits");
  return static_cast<std::uint32_t>(rounded);
}

}  // namespace graph_text

/// Loads a MatrixMarket file as a graph: `%%MatrixMarket matrix coordinate FIELD SYMMETRY`, FIELD
/// pattern, integer or real (reals rounded to the nearest integer weight), SYMMETRY general (entry
/// (i, j) is the edge i -> j) or symmetric (the lower triangle; each entry stored both ways, a
/// diagonal entry once). Indices start at 1; vertex v of the graph is row v + 1. The matrix must be
/// square. Throws std::runtime_error naming the file and line of what is wrong.
inline CsrGraph load_matrix_market(const std::filesystem::path& path, const GraphLoadOptions& options = {}) {
  using namespace graph_text;
  LineReader in(path);
  std::array<std::string_view, 5> banner{};
  if (!in.next() || split(in.line(), banner) != 5 || banner[0] != "%%MatrixMarket" || !iequals(banner[1], "matrix"))
    in.fail("not a MatrixMarket matrix: the first line must be '%%MatrixMarket matrix coordinate FIELD SYMMETRY'");
  if (!iequals(banner[2], "coordinate"))
    in.fail("format '" + std::string(banner[2]) + "' is not supported: a graph needs the coordinate (sparse) format");
  const bool pattern = iequals(banner[3], "pattern");
  if (!pattern && !iequals(banner[3], "integer") && !iequals(banner[3], "real") && !iequals(banner[3], "double"))
    in.fail("field '" + std::string(banner[3]) + "' is not supported (pattern, integer or real)");
  const bool symmetric = iequals(banner[4], "symmetric");
  if (!symmetric && !iequals(banner[4], "general"))
    in.fail("symmetry '" + std::string(banner[4]) + "' is not supported (general or symmetric)");

  std::array<std::string_view, 3> fields{};
  do {
    if (!in.next()) in.fail("the file ends before the size line 'ROWS COLUMNS ENTRIES'");
  } while (is_skipped(in.line(), "%"));
  if (split(in.line(), fields) != 3) in.fail("expected the size line 'ROWS COLUMNS ENTRIES'");
  const std::uint64_t rows = parse_count(in, fields[0], "row count");
  const std::uint64_t cols = parse_count(in, fields[1], "column count");
  const std::uint64_t entries = parse_count(in, fields[2], "entry count");
  if (rows != cols)
    in.fail("the matrix is " + std::to_string(rows) + " x " + std::to_string(cols) +
            ": a graph's adjacency matrix must be square");
  if (rows > max_graph_vertices)
    in.fail(std::to_string(rows) + " rows: vertex ids must fit 32 bits (at most " + std::to_string(max_graph_vertices) +
            " vertices)");

  const bool weighted = !pattern && options.weights;
  const std::size_t fields_per_entry = pattern ? 2 : 3;
  std::vector<GraphEdge> edges;
  // An entry line takes at least 4 bytes ("1 1\n"): a size line that promises more is wrong
  // and gets its error below, not a huge reservation here.
  edges.reserve(std::min(entries, std::filesystem::file_size(path) / 4) * (symmetric ? 2 : 1));
  std::uint64_t seen = 0;
  while (in.next()) {
    if (is_skipped(in.line(), "%")) continue;
    if (seen == entries) in.fail("more entries than the " + std::to_string(entries) + " the size line declares");
    if (split(in.line(), fields) != fields_per_entry)
      in.fail(pattern ? "expected an entry 'ROW COLUMN' (a pattern matrix has no values)"
                      : "expected an entry 'ROW COLUMN VALUE'");
    const std::uint64_t row = parse_count(in, fields[0], "row index");
    const std::uint64_t col = parse_count(in, fields[1], "column index");
    if (row < 1 || row > rows || col < 1 || col > rows)
      in.fail("entry (" + std::string(fields[0]) + ", " + std::string(fields[1]) + ") is outside 1.." +
              std::to_string(rows) + " (MatrixMarket indices start at 1)");
    if (symmetric && col > row)
      in.fail("entry (" + std::to_string(row) + ", " + std::to_string(col) +
              ") is above the diagonal: a symmetric file stores the lower triangle only");
    const GraphEdge e{static_cast<std::uint32_t>(row - 1), static_cast<std::uint32_t>(col - 1),
                      weighted ? parse_weight(in, fields[2]) : 0};
    edges.push_back(e);
    if (symmetric && e.u != e.v) edges.push_back({e.v, e.u, e.w});
    ++seen;
  }
  if (seen < entries)
    in.fail("the file ends after " + std::to_string(seen) + " of the " + std::to_string(entries) +
            " entries the size line declares");
  return csr_from_edges(rows, edges, options.undirected && !symmetric, weighted);
}

/// Loads a whitespace-separated edge list: one edge `U V` or `U V WEIGHT` per line (all lines with
/// a weight or none), ids from 0 (SNAP's convention), lines starting with '#' or '%' and blank
/// lines skipped. The graph has max id + 1 vertices; weights as in load_matrix_market. Throws
/// std::runtime_error naming the file and line of what is wrong.
inline CsrGraph load_edge_list(const std::filesystem::path& path, const GraphLoadOptions& options = {}) {
  using namespace graph_text;
  LineReader in(path);
  std::vector<GraphEdge> edges;
  std::uint64_t vertices = 0, first_edge_line = 0;
  std::size_t fields_per_edge = 0;
  std::array<std::string_view, 3> fields{};
  while (in.next()) {
    if (is_skipped(in.line(), "#%")) continue;
    const std::size_t count = split(in.line(), fields);
    if (count != 2 && count != 3) in.fail("expected an edge 'U V' or 'U V WEIGHT', found " + std::to_string(count) + " fields");
    if (fields_per_edge == 0) {
      fields_per_edge = count;
      first_edge_line = in.number();
    } else if (count != fields_per_edge) {
      in.fail(std::string(count == 3 ? "this edge has a weight, the first edge" : "this edge has no weight, the first edge") +
              " (line " + std::to_string(first_edge_line) + ") " + (count == 3 ? "has none" : "has one"));
    }
    const std::uint64_t u = parse_count(in, fields[0], "vertex id"), v = parse_count(in, fields[1], "vertex id");
    if (std::max(u, v) >= max_graph_vertices)
      in.fail("vertex id " + std::to_string(std::max(u, v)) + " does not fit: ids must be below " +
              std::to_string(max_graph_vertices));
    vertices = std::max(vertices, std::max(u, v) + 1);
    const bool weighted = count == 3 && options.weights;
    edges.push_back({static_cast<std::uint32_t>(u), static_cast<std::uint32_t>(v), weighted ? parse_weight(in, fields[2]) : 0});
  }
  return csr_from_edges(vertices, edges, options.undirected, fields_per_edge == 3 && options.weights);
}

// --- Binary cache ----------------------------------------------------------------------------

/// What a graph cache holds, from its header.
struct GraphCacheInfo {
  std::uint64_t vertices = 0;
  std::uint64_t directed_edges = 0;
  bool has_weights = false;
};

/// The binary cache's layout (host byte order, which load checks through the magic's bytes):
/// a 56-byte header, then offsets (vertices + 1 x uint64), columns (directed_edges x uint32) and,
/// if flagged, weights (directed_edges x uint32). Each array has a checksum in the header.
namespace graph_cache_format {

inline constexpr char magic[8] = {'W', 'V', 'M', 'G', 'R', 'A', 'P', 'H'};
inline constexpr std::uint32_t version = 1;
inline constexpr std::uint32_t flag_weights = 1;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t flags;
  std::uint64_t vertices;
  std::uint64_t directed_edges;
  std::uint64_t offsets_checksum, columns_checksum, weights_checksum;
};
static_assert(sizeof(Header) == 56 && std::is_trivially_copyable_v<Header>);
static_assert(std::endian::native == std::endian::little, "the graph cache is written little-endian, as the host is");

/// 64 bits of the bytes: four independent multiply-rotate lanes (so the multiplies overlap), each
/// step a bijection of the word, so any change in one 8-byte word always changes the result.
inline std::uint64_t checksum(std::span<const std::byte> bytes) {
  std::uint64_t lane[4] = {mix64(1), mix64(2), mix64(3), mix64(4)};
  const auto step = [](std::uint64_t state, std::uint64_t word) {
    return std::rotl(state ^ word, 31) * 0x9e3779b97f4a7c15ull;
  };
  const std::size_t words = bytes.size() / 8;
  std::size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    std::uint64_t w[4];
    std::memcpy(w, bytes.data() + i * 8, sizeof w);
    for (int l = 0; l < 4; ++l) lane[l] = step(lane[l], w[l]);
  }
  for (; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + i * 8, 8);
    lane[i % 4] = step(lane[i % 4], w);
  }
  if (const std::size_t rest = bytes.size() - words * 8; rest != 0) {
    std::uint64_t tail = 0;
    std::memcpy(&tail, bytes.data() + words * 8, rest);
    lane[0] = step(lane[0], tail);
  }
  return mix64(lane[0] ^ mix64(lane[1] ^ mix64(lane[2] ^ mix64(lane[3] ^ bytes.size()))));
}

/// Bytes of a cache with these counts.
inline std::uint64_t file_bytes(std::uint64_t vertices, std::uint64_t directed_edges, bool weights) {
  return sizeof(Header) + (vertices + 1) * 8 + directed_edges * 4 * (weights ? 2 : 1);
}

/// Opens `path` and reads and checks its header: the magic, the version and that the file's size
/// is what the counts need.
inline Header open(const std::filesystem::path& path, std::ifstream& in) {
  in.open(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open graph cache " + path.string() + " (missing or unreadable)");
  const std::uint64_t size = std::filesystem::file_size(path);
  Header h{};
  if (size < sizeof h || !in.read(reinterpret_cast<char*>(&h), sizeof h))
    throw std::runtime_error(path.string() + ": " + std::to_string(size) + " bytes, shorter than a graph cache's " +
                             std::to_string(sizeof h) + "-byte header");
  if (std::memcmp(h.magic, magic, sizeof magic) != 0)
    throw std::runtime_error(path.string() + ": not a warpvm graph cache (it does not start with 'WVMGRAPH')");
  if (h.version != version)
    throw std::runtime_error(path.string() + ": graph cache version " + std::to_string(h.version) +
                             ", this build reads version " + std::to_string(version) + ": generate it again");
  if ((h.flags & ~flag_weights) != 0)
    throw std::runtime_error(path.string() + ": unknown flags " + std::to_string(h.flags) + " in the header: the file is corrupt");
  // Bounds that keep file_bytes from overflowing; a real cache is far below them.
  if (h.vertices > max_graph_vertices || h.directed_edges > (std::uint64_t{1} << 60))
    throw std::runtime_error(path.string() + ": impossible counts in the header (" + std::to_string(h.vertices) +
                             " vertices, " + std::to_string(h.directed_edges) + " edges): the file is corrupt");
  const bool weights = (h.flags & flag_weights) != 0;
  const std::uint64_t expected = file_bytes(h.vertices, h.directed_edges, weights);
  if (size != expected)
    throw std::runtime_error(path.string() + ": " + std::to_string(size) + " bytes, but the header's " +
                             std::to_string(h.vertices) + " vertices and " + std::to_string(h.directed_edges) +
                             " edges" + (weights ? " with weights" : "") + " need " + std::to_string(expected) +
                             ": the file is truncated or corrupt");
  return h;
}

/// Reads the next array of the file into `into` and compares its checksum with the header's.
template <class T>
void read_checked(std::ifstream& in, const std::filesystem::path& path, std::span<T> into, std::uint64_t expected,
                  const char* what) {
  const std::span<std::byte> bytes = std::as_writable_bytes(into);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw std::runtime_error(path.string() + ": reading the " + what + " failed");
  if (checksum(bytes) != expected)
    throw std::runtime_error(path.string() + ": the " + what + " do not match their checksum: the file is corrupt");
}

}  // namespace graph_cache_format

/// Writes a CSR (and its weights, unless `weights` is empty) as a graph cache. It goes to
/// PATH.partial first and is renamed to PATH when complete, so an interrupted write never leaves a
/// file at PATH. Throws std::invalid_argument for a malformed CSR, std::runtime_error when the file
/// cannot be written.
inline void write_graph_cache(const std::filesystem::path& path, std::span<const std::uint64_t> offsets,
                              std::span<const std::uint32_t> columns, std::span<const std::uint32_t> weights = {}) {
  namespace format = graph_cache_format;
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != columns.size())
    throw std::invalid_argument("write_graph_cache: offsets must start at 0 and end at the number of columns");
  if (offsets.size() - 1 > max_graph_vertices)
    throw std::invalid_argument("write_graph_cache: more vertices than 32-bit ids can name");
  if (!weights.empty() && weights.size() != columns.size())
    throw std::invalid_argument("write_graph_cache: weights must be empty or as long as columns");
  format::Header h{};
  std::memcpy(h.magic, format::magic, sizeof h.magic);
  h.version = format::version;
  h.flags = weights.empty() ? 0 : format::flag_weights;
  h.vertices = offsets.size() - 1;
  h.directed_edges = columns.size();
  h.offsets_checksum = format::checksum(std::as_bytes(offsets));
  h.columns_checksum = format::checksum(std::as_bytes(columns));
  h.weights_checksum = weights.empty() ? 0 : format::checksum(std::as_bytes(weights));

  std::filesystem::path partial = path;
  partial += ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot create " + partial.string());
  const auto put = [&out](std::span<const std::byte> bytes) {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  put(std::as_bytes(std::span(&h, 1)));
  put(std::as_bytes(offsets));
  put(std::as_bytes(columns));
  if (!weights.empty()) put(std::as_bytes(weights));
  out.close();
  if (!out) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw std::runtime_error("writing " + partial.string() + " failed (disk full?)");
  }
  std::filesystem::rename(partial, path);
}

inline void write_graph_cache(const std::filesystem::path& path, const CsrGraph& g) {
  write_graph_cache(path, g.offsets, g.columns, g.weights);
}

/// The counts in a graph cache's header (after the checks of read_graph_cache, except the
/// checksums), e.g. to size pinned buffers before read_graph_cache.
inline GraphCacheInfo graph_cache_info(const std::filesystem::path& path) {
  std::ifstream in;
  const graph_cache_format::Header h = graph_cache_format::open(path, in);
  return {h.vertices, h.directed_edges, (h.flags & graph_cache_format::flag_weights) != 0};
}

/// Reads a graph cache into memory the caller owns: `offsets` must hold vertices + 1 entries and
/// `columns` directed_edges (graph_cache_info); `weights` empty (the file's weights, if any, are not
/// read) or directed_edges long (the file must have weights). Throws std::runtime_error for a file
/// that is not a complete, intact cache (magic, version, size, checksums).
inline void read_graph_cache(const std::filesystem::path& path, std::span<std::uint64_t> offsets,
                             std::span<std::uint32_t> columns, std::span<std::uint32_t> weights = {}) {
  namespace format = graph_cache_format;
  std::ifstream in;
  const format::Header h = format::open(path, in);
  if (offsets.size() != h.vertices + 1 || columns.size() != h.directed_edges ||
      (!weights.empty() && weights.size() != h.directed_edges))
    throw std::invalid_argument("read_graph_cache: " + path.string() + " holds " + std::to_string(h.vertices) +
                                " vertices and " + std::to_string(h.directed_edges) +
                                " edges; the buffers must be sized for them");
  if (!weights.empty() && (h.flags & format::flag_weights) == 0)
    throw std::runtime_error(path.string() + ": the graph cache has no weights");
  format::read_checked(in, path, offsets, h.offsets_checksum, "row offsets");
  format::read_checked(in, path, columns, h.columns_checksum, "column indices");
  if (!weights.empty()) format::read_checked(in, path, weights, h.weights_checksum, "weights");
}

/// Reads a whole graph cache, weights included if it has them.
inline CsrGraph load_graph_cache(const std::filesystem::path& path) {
  const GraphCacheInfo info = graph_cache_info(path);
  CsrGraph g;
  g.offsets.resize(info.vertices + 1);
  g.columns.resize(info.directed_edges);
  if (info.has_weights) g.weights.resize(info.directed_edges);
  read_graph_cache(path, g.offsets, g.columns, g.weights);
  return g;
}

// --- Balanced CSR ----------------------------------------------------------------------------

/// DREAM's Balanced CSR (papers/002, Section 5, Fig. 10): every neighbour list cut into chunks of
/// at most `chunk_edges` edges, so that a thread or a warp per chunk gets bounded work however
/// skewed the degrees (R-MAT's hubs). A chunk lies within one row; a row of degree d gives
/// ceil(d / chunk_edges) chunks, all full but the last; rows without edges give none. The column
/// array is the CSR's, unchanged: chunk i covers columns[chunk_offsets[i] .. chunk_offsets[i + 1])
/// of vertex chunk_vertex[i], and the chunks, in order, cover every column entry once.
struct BalancedCsr {
  std::uint32_t chunk_edges = 0;
  std::vector<std::uint64_t> chunk_offsets{0};  ///< chunks + 1: where each chunk starts, then the end
  std::vector<std::uint32_t> chunk_vertex;      ///< the vertex whose neighbours each chunk holds

  struct Chunk {
    std::uint32_t vertex;
    std::uint64_t begin, end;  ///< column entries [begin, end)
  };

  [[nodiscard]] std::uint64_t chunks() const { return chunk_vertex.size(); }
  [[nodiscard]] Chunk chunk(std::uint64_t i) const { return {chunk_vertex[i], chunk_offsets[i], chunk_offsets[i + 1]}; }
  /// The memory it adds to the CSR (DREAM reports up to 400 MB for its graphs).
  [[nodiscard]] std::uint64_t bytes() const { return chunk_offsets.size() * 8 + chunk_vertex.size() * 4; }
};

/// The Balanced CSR of a CSR's row offsets. Throws std::invalid_argument for chunk_edges = 0 or
/// offsets that do not start at 0 and never decrease.
inline BalancedCsr balance_csr(std::span<const std::uint64_t> offsets, std::uint32_t chunk_edges) {
  if (chunk_edges == 0) throw std::invalid_argument("balance_csr: chunks need at least one edge");
  if (offsets.empty() || offsets.front() != 0) throw std::invalid_argument("balance_csr: offsets must start at 0");
  const std::uint64_t vertices = offsets.size() - 1;
  if (vertices > max_graph_vertices) throw std::invalid_argument("balance_csr: more vertices than 32-bit ids can name");
  std::uint64_t chunks = 0;
  for (std::uint64_t v = 0; v < vertices; ++v) {
    if (offsets[v + 1] < offsets[v])
      throw std::invalid_argument("balance_csr: offsets decrease at vertex " + std::to_string(v));
    chunks += (offsets[v + 1] - offsets[v] + chunk_edges - 1) / chunk_edges;
  }
  BalancedCsr b;
  b.chunk_edges = chunk_edges;
  b.chunk_offsets.clear();
  b.chunk_offsets.reserve(chunks + 1);
  b.chunk_vertex.reserve(chunks);
  // A chunk ends where the next one begins (rows without edges lie between them with no
  // entries), the last one at the end of the column array.
  for (std::uint64_t v = 0; v < vertices; ++v) {
    for (std::uint64_t begin = offsets[v]; begin < offsets[v + 1]; begin += chunk_edges) {
      b.chunk_offsets.push_back(begin);
      b.chunk_vertex.push_back(static_cast<std::uint32_t>(v));
    }
  }
  b.chunk_offsets.push_back(offsets.back());
  return b;
}

/// The other direction of `chunk_vertex`, for a frontier of vertices to find its chunks:
/// `vertices` + 1 entries, vertex v's chunks [first[v], first[v + 1]) (empty for rows without
/// edges), the last the chunk count. 32-bit like the GPU's chunk ids. Throws
/// std::invalid_argument for more chunks than 32-bit ids can name or a chunk of a vertex not
/// below `vertices`.
inline std::vector<std::uint32_t> first_chunks(const BalancedCsr& b, std::uint64_t vertices) {
  if (b.chunks() > 0xffffffffu) throw std::invalid_argument("first_chunks: more chunks than 32-bit ids can name");
  std::vector<std::uint32_t> first(vertices + 1, 0);
  // Chunks per vertex at v + 1, then a running sum: chunks come in vertex order.
  for (const std::uint32_t v : b.chunk_vertex) {
    if (v >= vertices) throw std::invalid_argument("first_chunks: a chunk of vertex " + std::to_string(v) + " of " + std::to_string(vertices));
    ++first[v + 1];
  }
  for (std::uint64_t v = 0; v < vertices; ++v) first[v + 1] += first[v];
  return first;
}

}  // namespace warpvm::workloads
