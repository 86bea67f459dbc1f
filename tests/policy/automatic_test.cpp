#include "warpvm/config.hpp"
#include "warpvm/detail/policy/automatic.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace warpvm::detail {
namespace {

TEST(AutomaticPlacement, BudgetIsTheShareOfThePageInSectors) {
  EXPECT_EQ(automatic_remote_sectors(4096, Config{}.automatic_remote_share), 8u);
  EXPECT_EQ(automatic_remote_sectors(4096, 0.0), 0u);
  EXPECT_EQ(automatic_remote_sectors(4096, 1.0), 128u);
  EXPECT_EQ(automatic_remote_sectors(512, 1.0 / 16), 1u);
  EXPECT_EQ(automatic_remote_sectors(512, 0.05), 0u);  // under one sector: every read migrates
  EXPECT_EQ(automatic_remote_sectors(std::uint64_t{2} << 20, 1.0 / 16), 4096u);
  // Once the cache can evict, a page pays for its copy first: a 4 KB page's 128 sectors, eight
  // 512-byte rows; the largest share of the largest page still fits the count's 32 bits.
  EXPECT_EQ(automatic_remote_sectors(4096, Config{}.automatic_remote_share_evicting), 128u);
  EXPECT_EQ(automatic_remote_sectors(std::uint64_t{2} << 20, 64.0), std::uint32_t{1} << 22);
}

TEST(AutomaticPlacement, ReadsStayRemoteUntilTheirSectorsWouldPassTheBudget) {
  constexpr std::uint32_t budget = 8;
  // Scattered reads, one sector each: the eighth is remote, the ninth migrates.
  std::uint32_t fetched = 0;
  for (std::uint32_t read = 1; read <= budget; ++read) {
    ASSERT_TRUE(automatic_reads_remotely(fetched, 1, budget)) << "read " << read;
    fetched += 1;
  }
  EXPECT_FALSE(automatic_reads_remotely(fetched, 1, budget));
  // A warp access fetching a sector per lane costs more than the whole budget: it migrates at once.
  EXPECT_FALSE(automatic_reads_remotely(0, 32, budget));
  // Two coalesced accesses of 4 sectors fit; a third does not.
  EXPECT_TRUE(automatic_reads_remotely(0, 4, budget));
  EXPECT_TRUE(automatic_reads_remotely(4, 4, budget));
  EXPECT_FALSE(automatic_reads_remotely(8, 4, budget));
  // A count raced past the budget by concurrent adders never wraps into "remote".
  EXPECT_FALSE(automatic_reads_remotely(0xffffffffu, 1, budget));
  EXPECT_FALSE(automatic_reads_remotely(0, 1, 0));
}

}  // namespace
}  // namespace warpvm::detail
