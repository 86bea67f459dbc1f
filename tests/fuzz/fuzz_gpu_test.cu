// The differential fuzzer on the GPU, a few seeds of each quick-grid configuration (warpvm-fuzz
// runs thousands: docs/fuzz.md).

#include "fuzz_gpu.hpp"
#include "gpu_test_support.cuh"

namespace warpvm::testing {
namespace {

class Fuzz : public GpuTest {};

TEST_F(Fuzz, QuickGridSeedsMatchTheModelBitForBit) {
  const std::uint64_t seeds = 2 * fuzz::cells(fuzz::Grid::quick).size();
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    const fuzz::RunConfig r = fuzz::make_run(seed, fuzz::Grid::quick);
    const fuzz::SeedResult result =
        fuzz::run_seed(r, [&](const fuzz::ReferenceModel& model) { return fuzz::make_gpu_backend(r, model); });
    EXPECT_TRUE(result.exact) << fuzz::reproducer("build/tools/fuzz/warpvm-fuzz", "gpu", r) << " (" << r.describe()
                              << "): " << result.failure;
    EXPECT_GT(result.pages_in, 0u);
  }
}

}  // namespace
}  // namespace warpvm::testing
