// The graph inputs beside R-MAT (warpvm/workloads/graph/graph_inputs.hpp): the uniform generator is
// deterministic and well formed, weights are symmetric and in range, the loaders read what was
// written and name the line of what is wrong, the binary cache round-trips and refuses damaged
// files, and the Balanced CSR covers every edge once in bounded chunks.

#include "warpvm/workloads/graph/graph_inputs.hpp"

#include "graph_test_support.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace warpvm::workloads {
namespace {

using graph_testing::ThreadedFor;

template <class ParallelFor = SerialFor>
CsrGraph uniform(const UniformParams& p, ParallelFor&& parallel_for = {}) {
  CsrGraph g;
  g.offsets.resize(p.vertices() + 1);
  g.columns.resize(p.directed_edges());
  build_uniform_csr(p, g.offsets, g.columns, parallel_for);
  return g;
}

CsrGraph rmat(const RmatParams& p) {
  graph_testing::Csr g = graph_testing::make(p);
  return {std::move(g.offsets), std::move(g.columns), {}};
}

/// Every stored entry as (from, to, weight), sorted; weight 0 for an unweighted graph.
std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> entries(const CsrGraph& g, bool reversed = false) {
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> out;
  for (std::uint32_t v = 0; v < g.vertices(); ++v) {
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
      const std::uint32_t w = g.has_weights() ? g.weights[e] : 0;
      out.emplace_back(reversed ? g.columns[e] : v, reversed ? v : g.columns[e], w);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A fresh directory per test (ctest runs the tests as separate processes at once), removed after.
class GraphFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("warpvm-graph-inputs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  /// Expects `message` to contain each of `parts` (where the error is, and why).
  static void expect_in(const std::string& message, std::initializer_list<std::string_view> parts) {
    for (const std::string_view part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }

  /// The message of what `load` throws, or "" when it does not throw std::runtime_error.
  template <class Load>
  static std::string error_of(const Load& load) {
    try {
      load();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

// --- The shared CSR builder and the uniform generator ----------------------------------------

TEST(BuildCsr, GivesBuildRmatCsrsGraphForRmatsEdges) {
  const RmatParams p{.scale = 11, .edge_factor = 8, .seed = 17};
  const CsrGraph expected = rmat(p);
  const RmatEdges edge(p);
  const auto rmat_edge = [&](std::uint64_t k) {
    const auto [u, v] = edge(k);
    return GraphEdge{u, v};
  };
  CsrGraph built;
  built.offsets.resize(p.vertices() + 1);
  built.columns.resize(p.directed_edges());
  build_csr(p.vertices(), p.undirected_edges(), rmat_edge, true, built.offsets, built.columns, {}, ThreadedFor{});
  EXPECT_EQ(built.offsets, expected.offsets);
  EXPECT_EQ(built.columns, expected.columns);
}

TEST(BuildCsr, HandMadeEdgesOneWayAndBothWays) {
  // 0 -> 2 (w 5), 0 -> 1 (w 7), 2 -> 2 (w 1), 0 -> 1 again (w 3), vertex 3 without edges.
  const std::vector<GraphEdge> edges{{0, 2, 5}, {0, 1, 7}, {2, 2, 1}, {0, 1, 3}};
  const CsrGraph one_way = csr_from_edges(4, edges, false, true);
  EXPECT_EQ(one_way.offsets, (std::vector<std::uint64_t>{0, 3, 3, 4, 4}));
  EXPECT_EQ(one_way.columns, (std::vector<std::uint32_t>{1, 1, 2, 2}));
  EXPECT_EQ(one_way.weights, (std::vector<std::uint32_t>{3, 7, 5, 1}));  // rows sorted by (column, weight)

  const CsrGraph both = csr_from_edges(4, edges, true, false);
  EXPECT_EQ(both.offsets, (std::vector<std::uint64_t>{0, 3, 5, 8, 8}));
  EXPECT_EQ(both.columns, (std::vector<std::uint32_t>{1, 1, 2, 0, 0, 0, 2, 2}));  // the self-loop twice, as R-MAT
  EXPECT_FALSE(both.has_weights());

  EXPECT_THROW(csr_from_edges(2, edges, false, false), std::invalid_argument);  // vertex 2 of 2
}

TEST(Uniform, SameSeedSameGraphWhateverTheThreads) {
  const UniformParams p{.scale = 12, .edge_factor = 16, .seed = 42};
  const CsrGraph serial = uniform(p);
  const CsrGraph threaded = uniform(p, ThreadedFor{});
  EXPECT_EQ(serial.offsets, uniform(p).offsets);
  EXPECT_EQ(serial.columns, uniform(p).columns);
  EXPECT_EQ(serial.offsets, threaded.offsets);
  EXPECT_EQ(serial.columns, threaded.columns);
  EXPECT_NE(serial.columns, uniform(UniformParams{.scale = 12, .edge_factor = 16, .seed = 43}).columns)
      << "the seed must change the graph";
  EXPECT_NE(serial.columns, rmat(RmatParams{.scale = 12, .edge_factor = 16, .seed = 42}).columns);
}

TEST(Uniform, CsrIsWellFormedAndSymmetric) {
  const UniformParams p{.scale = 12, .edge_factor = 8, .seed = 7};
  const CsrGraph g = uniform(p, ThreadedFor{});
  ASSERT_NO_FATAL_FAILURE(graph_testing::expect_well_formed(g.offsets, g.columns, p.vertices(), p.directed_edges()));
  EXPECT_EQ(entries(g), entries(g, /*reversed=*/true)) << "every edge must be stored both ways";
}

TEST(Uniform, DegreesHaveNoHubsAndIdsAreUniform) {
  const UniformParams p{.scale = 14, .edge_factor = 16, .seed = 11};
  const CsrGraph g = uniform(p, ThreadedFor{});
  const std::uint64_t n = p.vertices(), mean = 2 * p.edge_factor;
  std::uint64_t max_degree = 0, isolated = 0;
  for (std::uint64_t v = 0; v < n; ++v) {
    const std::uint64_t degree = g.offsets[v + 1] - g.offsets[v];
    max_degree = std::max(max_degree, degree);
    isolated += degree == 0;
  }
  // About Poisson(32): the largest of 16384 degrees is near 60; R-MAT's hub is over 20 x the mean.
  EXPECT_LT(max_degree, 3 * mean);
  EXPECT_GT(max_degree, mean);
  EXPECT_EQ(isolated, 0u);  // P(degree 0) = e^-32
  // The two ends are independent: self-loops (expected 16 x 2 entries) and repeated neighbours
  // (about 0.2% of the entries for 262144 edges among 1.3e8 pairs) are rare.
  std::uint64_t self_loops = 0, repeats = 0;
  for (std::uint64_t v = 0; v < n; ++v) {
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
      self_loops += g.columns[e] == v;
      repeats += e > g.offsets[v] && g.columns[e] == g.columns[e - 1];
    }
  }
  EXPECT_LT(self_loops, 200u);
  EXPECT_LT(repeats, g.columns.size() / 100);
  // Each half of the ids, and each residue mod 4 (the low bits), takes its share of the ends.
  std::uint64_t low_half = 0, residue[4] = {};
  for (const std::uint32_t u : g.columns) {
    low_half += u < n / 2;
    ++residue[u % 4];
  }
  const double entries_count = static_cast<double>(g.columns.size());
  EXPECT_NEAR(static_cast<double>(low_half) / entries_count, 0.5, 0.01);
  for (const std::uint64_t r : residue) EXPECT_NEAR(static_cast<double>(r) / entries_count, 0.25, 0.01);
}

TEST(Uniform, RefusesWhatItCannotRepresent) {
  EXPECT_THROW(UniformParams{.scale = 0}.validate(), std::invalid_argument);
  EXPECT_THROW(UniformParams{.scale = 32}.validate(), std::invalid_argument);
  EXPECT_THROW(UniformParams{.edge_factor = 0}.validate(), std::invalid_argument);
  std::vector<std::uint64_t> offsets(17);
  std::vector<std::uint32_t> columns(10);
  EXPECT_THROW(build_uniform_csr(UniformParams{.scale = 4}, offsets, columns), std::invalid_argument);
}

// --- Weights ---------------------------------------------------------------------------------

// edge_weight itself (range, spread, symmetry, seeds) is tested in graph_reference_test.cpp.
TEST(Weights, WeightsForFillsAnyCsrAlignedWithItsColumns) {
  CsrGraph g = uniform(UniformParams{.scale = 11, .edge_factor = 8, .seed = 2});
  g.weights = weights_for(g.offsets, g.columns, 99);
  std::vector<std::uint32_t> filled(g.columns.size());
  fill_edge_weights(g.offsets, g.columns, filled, 99);
  EXPECT_EQ(g.weights, filled);
  EXPECT_EQ(g.weights, weights_for(g.offsets, g.columns, 99, ThreadedFor{}));
  EXPECT_TRUE(std::all_of(g.weights.begin(), g.weights.end(), [](std::uint32_t w) { return w >= 1 && w <= 255; }));
  EXPECT_EQ(entries(g), entries(g, /*reversed=*/true)) << "u -> v and v -> u must weigh the same";

  // A one-way graph, as a general .mtx gives: each entry gets its pair's weight.
  const std::vector<GraphEdge> edges{{2, 0}, {0, 1}};
  const CsrGraph directed = csr_from_edges(3, edges, false, false);
  EXPECT_EQ(weights_for(directed.offsets, directed.columns, 7),
            (std::vector<std::uint32_t>{edge_weight(7, 0, 1), edge_weight(7, 2, 0)}));
}

// --- MatrixMarket ----------------------------------------------------------------------------

TEST_F(GraphFiles, MatrixMarketGeneralIntegerWithComments) {
  const auto path = write("general.mtx",
                          "%%MatrixMarket matrix coordinate integer general\n"
                          "% a comment\n"
                          "%\n"
                          "4 4 5\n"
                          "1 3 10\n"
                          "1 2 20\n"
                          "\n"
                          "3 1 30\n"
                          "4 4 40\r\n"  // a Windows line end
                          "2 3 50\n");
  const CsrGraph g = load_matrix_market(path);
  EXPECT_EQ(g.offsets, (std::vector<std::uint64_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(g.columns, (std::vector<std::uint32_t>{1, 2, 2, 0, 3}));
  EXPECT_EQ(g.weights, (std::vector<std::uint32_t>{20, 10, 50, 30, 40}));

  const CsrGraph undirected = load_matrix_market(path, {.weights = false, .undirected = true});
  EXPECT_FALSE(undirected.has_weights());
  EXPECT_EQ(undirected.offsets, (std::vector<std::uint64_t>{0, 3, 5, 8, 10}));
  EXPECT_EQ(undirected.columns, (std::vector<std::uint32_t>{1, 2, 2, 0, 2, 0, 0, 1, 3, 3}));
}

TEST_F(GraphFiles, MatrixMarketSymmetricPatternAndReal) {
  const CsrGraph pattern = load_matrix_market(write("sym.mtx",
                                                    "%%MatrixMarket matrix coordinate pattern symmetric\n"
                                                    "3 3 3\n"
                                                    "2 1\n"
                                                    "3 3\n"
                                                    "3 2\n"));
  // Off-diagonal entries both ways, the diagonal entry once.
  EXPECT_EQ(pattern.offsets, (std::vector<std::uint64_t>{0, 1, 3, 5}));
  EXPECT_EQ(pattern.columns, (std::vector<std::uint32_t>{1, 0, 2, 1, 2}));
  EXPECT_FALSE(pattern.has_weights());

  const CsrGraph real = load_matrix_market(write("real.mtx",
                                                 "%%MatrixMarket matrix coordinate real symmetric\n"
                                                 "2 2 2\n"
                                                 "2 1 2.6\n"
                                                 "1 1 1.5e1\n"));
  EXPECT_EQ(real.columns, (std::vector<std::uint32_t>{0, 1, 0}));
  EXPECT_EQ(real.weights, (std::vector<std::uint32_t>{15, 3, 3}));  // rounded to the nearest integer
}

TEST_F(GraphFiles, MatrixMarketRoundTripOfAGeneratedGraph) {
  CsrGraph g = uniform(UniformParams{.scale = 9, .edge_factor = 4, .seed = 5});
  g.weights = weights_for(g.offsets, g.columns, 5);
  std::ostringstream text;
  text << "%%MatrixMarket matrix coordinate integer general\n" << g.vertices() << ' ' << g.vertices() << ' '
       << g.directed_edges() << '\n';
  // Written column-major (by destination), so the loader must sort the rows itself.
  for (const auto& [to, from, w] : entries(g, /*reversed=*/true)) text << from + 1 << ' ' << to + 1 << ' ' << w << '\n';
  const CsrGraph loaded = load_matrix_market(write("uniform.mtx", text.str()));
  EXPECT_EQ(loaded.offsets, g.offsets);
  EXPECT_EQ(loaded.columns, g.columns);
  EXPECT_EQ(loaded.weights, g.weights);
}

TEST_F(GraphFiles, MatrixMarketErrorsNameTheLine) {
  const std::string general = "%%MatrixMarket matrix coordinate integer general\n";
  const auto error = [&](const std::string& name, const std::string& text) {
    const auto path = write(name, text);
    return error_of([&] { load_matrix_market(path); });
  };
  expect_in(error("banner.mtx", "1 2 3\n"), {"banner.mtx:1: ", "not a MatrixMarket matrix"});
  expect_in(error("array.mtx", "%%MatrixMarket matrix array real general\n2 2\n"), {"array.mtx:1: ", "coordinate"});
  expect_in(error("complex.mtx", "%%MatrixMarket matrix coordinate complex general\n"),
            {"complex.mtx:1: ", "field 'complex' is not supported"});
  expect_in(error("skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n"),
            {"skew.mtx:1: ", "symmetry 'skew-symmetric' is not supported"});
  expect_in(error("nosize.mtx", general + "% only comments\n"), {"nosize.mtx:2: ", "before the size line"});
  expect_in(error("square.mtx", general + "3 4 1\n1 1 1\n"), {"square.mtx:2: ", "must be square"});
  expect_in(error("count.mtx", general + "3 3 x\n"), {"count.mtx:2: ", "entry count 'x'"});
  expect_in(error("fields.mtx", general + "3 3 2\n1 2 1\n1 2\n"), {"fields.mtx:4: ", "ROW COLUMN VALUE"});
  expect_in(error("zero.mtx", general + "3 3 1\n0 2 1\n"), {"zero.mtx:3: ", "indices start at 1"});
  expect_in(error("range.mtx", general + "%\n3 3 2\n1 2 1\n2 4 1\n"), {"range.mtx:5: ", "(2, 4) is outside 1..3"});
  expect_in(error("upper.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n1 2\n"),
            {"upper.mtx:3: ", "above the diagonal"});
  expect_in(error("short.mtx", general + "3 3 3\n1 2 1\n2 3 1\n"), {"short.mtx:4: ", "after 2 of the 3 entries"});
  expect_in(error("long.mtx", general + "3 3 1\n1 2 1\n2 3 1\n"), {"long.mtx:4: ", "more entries than the 1"});
  expect_in(error("negative.mtx", general + "3 3 1\n1 2 -4\n"), {"negative.mtx:3: ", "weight -4 is negative"});
  expect_in(error("nan.mtx", general + "3 3 1\n1 2 nan\n"), {"nan.mtx:3: ", "not a finite number"});
  expect_in(error("big.mtx", general + "3 3 1\n1 2 4294967296\n"), {"big.mtx:3: ", "does not fit 32 bits"});
  expect_in(error_of([&] { load_matrix_market(dir_ / "missing.mtx"); }), {"missing.mtx", "cannot open"});
  // With weights off, values are not read: a real matrix with negative entries loads for BFS.
  const auto negative = write("negative-ok.mtx", general + "3 3 1\n1 2 -4\n");
  EXPECT_EQ(load_matrix_market(negative, {.weights = false}).columns, (std::vector<std::uint32_t>{1}));
}

// --- Edge lists ------------------------------------------------------------------------------

TEST_F(GraphFiles, EdgeListWithCommentsAndWeights) {
  const auto path = write("weighted.el",
                          "# SNAP-style header\n"
                          "% another comment\n"
                          "0 5 3\n"
                          "\n"
                          "  5\t0   7  \n"
                          "2 2 1\n");
  const CsrGraph g = load_edge_list(path);
  EXPECT_EQ(g.vertices(), 6u);  // max id + 1
  EXPECT_EQ(g.offsets, (std::vector<std::uint64_t>{0, 1, 1, 2, 2, 2, 3}));
  EXPECT_EQ(g.columns, (std::vector<std::uint32_t>{5, 2, 0}));
  EXPECT_EQ(g.weights, (std::vector<std::uint32_t>{3, 1, 7}));

  const CsrGraph undirected = load_edge_list(path, {.weights = false, .undirected = true});
  EXPECT_FALSE(undirected.has_weights());
  EXPECT_EQ(undirected.columns, (std::vector<std::uint32_t>{5, 5, 2, 2, 0, 0}));
}

TEST_F(GraphFiles, EdgeListRoundTripOfAGeneratedGraph) {
  const CsrGraph g = rmat(RmatParams{.scale = 10, .edge_factor = 4, .seed = 9});
  std::ostringstream text;
  text << "# R-MAT scale 10\n";
  for (const auto& [from, to, w] : entries(g)) text << from << ' ' << to << '\n';
  const CsrGraph loaded = load_edge_list(write("rmat.el", text.str()));
  EXPECT_FALSE(loaded.has_weights());
  // R-MAT leaves some high ids without edges, and the list names only those it has.
  ASSERT_LE(loaded.vertices(), g.vertices());
  EXPECT_TRUE(std::equal(loaded.offsets.begin(), loaded.offsets.end(), g.offsets.begin()));
  EXPECT_EQ(g.offsets.back(), loaded.offsets.back());
  EXPECT_EQ(loaded.columns, g.columns);
}

TEST_F(GraphFiles, EdgeListErrorsNameTheLine) {
  const auto error = [&](const std::string& name, const std::string& text) {
    const auto path = write(name, text);
    return error_of([&] { load_edge_list(path); });
  };
  expect_in(error("one.el", "# c\n0 1\n7\n"), {"one.el:3: ", "found 1 fields"});
  expect_in(error("four.el", "0 1 2 3\n"), {"four.el:1: ", "found 4 fields"});
  expect_in(error("mixed.el", "0 1\n1 2 5\n"), {"mixed.el:2: ", "has a weight, the first edge (line 1) has none"});
  expect_in(error("mixed2.el", "#\n0 1 5\n1 2\n"), {"mixed2.el:3: ", "has no weight, the first edge (line 2) has one"});
  expect_in(error("word.el", "0 one\n"), {"word.el:1: ", "vertex id 'one'"});
  expect_in(error("minus.el", "-1 2\n"), {"minus.el:1: ", "vertex id '-1'"});
  expect_in(error("huge.el", "0 4294967295\n"), {"huge.el:1: ", "ids must be below 4294967295"});
  expect_in(error("weight.el", "0 1 heavy\n"), {"weight.el:1: ", "weight 'heavy'"});
  expect_in(error_of([&] { load_edge_list(dir_ / "missing.el"); }), {"missing.el", "cannot open"});
  EXPECT_EQ(load_edge_list(write("empty.el", "# nothing\n")).vertices(), 0u);
}

// --- Binary cache ----------------------------------------------------------------------------

TEST_F(GraphFiles, CacheRoundTripWithAndWithoutWeights) {
  CsrGraph g = uniform(UniformParams{.scale = 11, .edge_factor = 8, .seed = 3}, ThreadedFor{});
  const auto plain = dir_ / "plain.wvg";
  write_graph_cache(plain, g);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "plain.wvg.partial"));
  const GraphCacheInfo info = graph_cache_info(plain);
  EXPECT_EQ(info.vertices, g.vertices());
  EXPECT_EQ(info.directed_edges, g.directed_edges());
  EXPECT_FALSE(info.has_weights);
  const CsrGraph loaded = load_graph_cache(plain);
  EXPECT_EQ(loaded.offsets, g.offsets);
  EXPECT_EQ(loaded.columns, g.columns);
  EXPECT_FALSE(loaded.has_weights());

  g.weights = weights_for(g.offsets, g.columns, 3);
  const auto weighted = dir_ / "weighted.wvg";
  write_graph_cache(weighted, g);
  EXPECT_EQ(std::filesystem::file_size(weighted), 56 + (g.vertices() + 1) * 8 + g.directed_edges() * 8);
  EXPECT_TRUE(graph_cache_info(weighted).has_weights);
  const CsrGraph with_weights = load_graph_cache(weighted);
  EXPECT_EQ(with_weights.offsets, g.offsets);
  EXPECT_EQ(with_weights.columns, g.columns);
  EXPECT_EQ(with_weights.weights, g.weights);

  // Into caller-owned buffers, leaving the weights out.
  std::vector<std::uint64_t> offsets(g.vertices() + 1);
  std::vector<std::uint32_t> columns(g.directed_edges());
  read_graph_cache(weighted, offsets, columns);
  EXPECT_EQ(offsets, g.offsets);
  EXPECT_EQ(columns, g.columns);
  std::vector<std::uint32_t> weights(g.directed_edges());
  EXPECT_THROW(read_graph_cache(plain, offsets, columns, weights), std::runtime_error);  // it has none
  columns.pop_back();
  EXPECT_THROW(read_graph_cache(weighted, offsets, columns), std::invalid_argument);

  // An empty graph round-trips too.
  write_graph_cache(dir_ / "empty.wvg", CsrGraph{});
  EXPECT_EQ(load_graph_cache(dir_ / "empty.wvg").vertices(), 0u);

  const std::vector<std::uint64_t> bad_offsets{0, 5};
  EXPECT_THROW(write_graph_cache(dir_ / "bad.wvg", bad_offsets, columns), std::invalid_argument);
}

TEST_F(GraphFiles, CacheRefusesDamagedFiles) {
  CsrGraph g = rmat(RmatParams{.scale = 9, .edge_factor = 4, .seed = 1});
  g.weights = weights_for(g.offsets, g.columns, 1);
  const auto good = dir_ / "good.wvg";
  write_graph_cache(good, g);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto damaged = [&](const std::string& name, std::string content) {
    const auto path = write(name, content);
    return error_of([&] { load_graph_cache(path); });
  };
  const auto flipped = [&](std::size_t at) {
    std::string copy = bytes;
    copy[at] = static_cast<char>(copy[at] ^ 0x10);
    return copy;
  };
  const std::size_t columns_start = 56 + (g.vertices() + 1) * 8, weights_start = columns_start + g.directed_edges() * 4;

  expect_in(damaged("magic.wvg", flipped(0)), {"not a warpvm graph cache"});
  expect_in(damaged("version.wvg", flipped(8)), {"version 17, this build reads version 1"});
  expect_in(damaged("truncated.wvg", bytes.substr(0, bytes.size() - 4)), {"the file is truncated or corrupt"});
  expect_in(damaged("longer.wvg", bytes + "x"), {"the file is truncated or corrupt"});
  expect_in(damaged("header.wvg", bytes.substr(0, 20)), {"shorter than a graph cache's 56-byte header"});
  expect_in(damaged("counts.wvg", flipped(16)), {"truncated or corrupt"});  // vertices changed
  expect_in(damaged("offsets.wvg", flipped(56 + 8 * 3)), {"row offsets do not match their checksum"});
  expect_in(damaged("columns.wvg", flipped(columns_start + 5)), {"column indices do not match their checksum"});
  expect_in(damaged("weights.wvg", flipped(bytes.size() - 1)), {"weights do not match their checksum"});
  expect_in(damaged("weights2.wvg", flipped(weights_start)), {"weights do not match their checksum"});
  expect_in(error_of([&] { load_graph_cache(dir_ / "missing.wvg"); }), {"cannot open graph cache"});
  // The file itself was left as it was.
  EXPECT_EQ(load_graph_cache(good).columns, g.columns);
}

TEST(GraphCacheChecksum, SeesEveryWordAndTheLength) {
  std::vector<std::uint32_t> words(37);
  for (std::uint32_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(mix64(i));
  const std::uint64_t base = graph_cache_format::checksum(std::as_bytes(std::span(words)));
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::vector<std::uint32_t> changed = words;
    changed[i] ^= 1u << (i % 32);
    EXPECT_NE(graph_cache_format::checksum(std::as_bytes(std::span(changed))), base) << "word " << i;
  }
  EXPECT_NE(graph_cache_format::checksum(std::as_bytes(std::span(words).first(36))), base);
}

// --- Balanced CSR ----------------------------------------------------------------------------

TEST(BalancedCsr, HandMadeRows) {
  // Degrees 0, 5, 0, 1, 9, 0 with chunks of 4 edges.
  const std::vector<std::uint64_t> offsets{0, 0, 5, 5, 6, 15, 15};
  const BalancedCsr b = balance_csr(offsets, 4);
  EXPECT_EQ(b.chunk_edges, 4u);
  EXPECT_EQ(b.chunk_vertex, (std::vector<std::uint32_t>{1, 1, 3, 4, 4, 4}));
  EXPECT_EQ(b.chunk_offsets, (std::vector<std::uint64_t>{0, 4, 5, 6, 10, 14, 15}));
  EXPECT_EQ(b.chunks(), 6u);
  const BalancedCsr::Chunk last = b.chunk(5);
  EXPECT_EQ(last.vertex, 4u);
  EXPECT_EQ(last.begin, 14u);
  EXPECT_EQ(last.end, 15u);
  EXPECT_EQ(b.bytes(), 7 * 8 + 6 * 4u);

  const BalancedCsr none = balance_csr(std::vector<std::uint64_t>{0, 0, 0}, 32);
  EXPECT_EQ(none.chunks(), 0u);
  EXPECT_EQ(none.chunk_offsets, (std::vector<std::uint64_t>{0}));

  EXPECT_THROW(balance_csr(offsets, 0), std::invalid_argument);
  EXPECT_THROW(balance_csr(std::vector<std::uint64_t>{0, 3, 2}, 4), std::invalid_argument);
  EXPECT_THROW(balance_csr(std::vector<std::uint64_t>{1, 3}, 4), std::invalid_argument);
}

TEST(BalancedCsr, CoversEveryEdgeOnceInBoundedChunksOnRmat) {
  const CsrGraph g = rmat(RmatParams{.scale = 12, .edge_factor = 16, .seed = 4});
  std::uint64_t max_degree = 0;
  for (std::uint64_t v = 0; v < g.vertices(); ++v) max_degree = std::max(max_degree, g.offsets[v + 1] - g.offsets[v]);
  ASSERT_GT(max_degree, 128u) << "the test needs a hub longer than a chunk";
  for (const std::uint32_t chunk_edges : {1u, 32u, 128u}) {
    SCOPED_TRACE(chunk_edges);
    const BalancedCsr b = balance_csr(g.offsets, chunk_edges);
    ASSERT_EQ(b.chunk_offsets.size(), b.chunks() + 1);
    std::vector<std::uint32_t> covered(g.directed_edges(), 0);
    std::vector<std::uint64_t> chunks_of(g.vertices(), 0);
    for (std::uint64_t i = 0; i < b.chunks(); ++i) {
      const BalancedCsr::Chunk c = b.chunk(i);
      ASSERT_LT(c.vertex, g.vertices());
      ASSERT_LT(c.begin, c.end) << "chunk " << i << " is empty";
      ASSERT_LE(c.end - c.begin, chunk_edges);
      ASSERT_GE(c.begin, g.offsets[c.vertex]) << "chunk " << i << " starts before its row";
      ASSERT_LE(c.end, g.offsets[c.vertex + 1]) << "chunk " << i << " ends after its row";
      // All chunks of a row are full but its last.
      if (c.end != g.offsets[c.vertex + 1]) {
        EXPECT_EQ(c.end - c.begin, chunk_edges);
      }
      for (std::uint64_t e = c.begin; e < c.end; ++e) ++covered[e];
      ++chunks_of[c.vertex];
    }
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](std::uint32_t n) { return n == 1; }))
        << "every column entry must be in exactly one chunk";
    for (std::uint64_t v = 0; v < g.vertices(); ++v)
      ASSERT_EQ(chunks_of[v], (g.offsets[v + 1] - g.offsets[v] + chunk_edges - 1) / chunk_edges) << "vertex " << v;
  }
}

TEST(BalancedCsr, FirstChunksOfHandMadeRows) {
  // Degrees 0, 5, 0, 1, 9, 0 with chunks of 4 edges: chunks 0-1 are vertex 1's, 2 vertex 3's,
  // 3-5 vertex 4's.
  const BalancedCsr b = balance_csr(std::vector<std::uint64_t>{0, 0, 5, 5, 6, 15, 15}, 4);
  EXPECT_EQ(first_chunks(b, 6), (std::vector<std::uint32_t>{0, 0, 2, 2, 3, 6, 6}));
  EXPECT_EQ(first_chunks(balance_csr(std::vector<std::uint64_t>{0, 0, 0}, 32), 2), (std::vector<std::uint32_t>{0, 0, 0}));
  EXPECT_THROW(first_chunks(b, 4), std::invalid_argument);  // chunks of vertex 4 among 4 vertices
}

TEST(BalancedCsr, FirstChunksNameEachVertexsChunksOnRmat) {
  const CsrGraph g = rmat(RmatParams{.scale = 12, .edge_factor = 16, .seed = 5});
  for (const std::uint32_t chunk_edges : {1u, 8u, 100u}) {
    SCOPED_TRACE(chunk_edges);
    const BalancedCsr b = balance_csr(g.offsets, chunk_edges);
    const std::vector<std::uint32_t> first = first_chunks(b, g.vertices());
    ASSERT_EQ(first.size(), g.vertices() + 1);
    EXPECT_EQ(first.front(), 0u);
    EXPECT_EQ(first.back(), b.chunks());
    for (std::uint64_t v = 0; v < g.vertices(); ++v) {
      ASSERT_LE(first[v], first[v + 1]);
      // v's chunks are exactly those naming v, and together they cover v's row.
      for (std::uint64_t c = first[v]; c < first[v + 1]; ++c) ASSERT_EQ(b.chunk_vertex[c], v) << "chunk " << c;
      if (first[v] == first[v + 1]) {
        ASSERT_EQ(g.offsets[v], g.offsets[v + 1]) << "vertex " << v << " has edges but no chunks";
      } else {
        ASSERT_EQ(b.chunk_offsets[first[v]], g.offsets[v]) << "vertex " << v;
        ASSERT_EQ(b.chunk_offsets[first[v + 1]], g.offsets[v + 1]) << "vertex " << v;
      }
    }
  }
}

}  // namespace
}  // namespace warpvm::workloads
