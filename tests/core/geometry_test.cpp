#include "warpvm/detail/core/geometry.hpp"

#include <gtest/gtest.h>

namespace warpvm::detail {
namespace {

TEST(Geometry, PageArithmeticAt4KiB) {
  constexpr PageGeometry g{12};
  EXPECT_EQ(g.page_bytes(), 4096u);
  EXPECT_EQ(g.page_of(0), 0u);
  EXPECT_EQ(g.page_of(4095), 0u);
  EXPECT_EQ(g.page_of(4096), 1u);
  EXPECT_EQ(g.offset_in_page(4097), 1u);
  EXPECT_EQ(g.page_begin(3), 3u * 4096);
  EXPECT_EQ(g.pages_for(1), 1u);
  EXPECT_EQ(g.pages_for(4096), 1u);
  EXPECT_EQ(g.pages_for(4097), 2u);
}

TEST(Geometry, PartialLastPage) {
  constexpr PageGeometry g{12};
  EXPECT_EQ(g.bytes_in_page(0, 10000), 4096u);
  EXPECT_EQ(g.bytes_in_page(2, 10000), 10000u - 8192u);
  EXPECT_EQ(g.bytes_in_page(3, 10000), 0u);
}

TEST(Geometry, ElementShift) {
  constexpr PageGeometry g{21};  // 2 MiB
  EXPECT_EQ(g.element_shift(4), 19u);
  EXPECT_EQ(g.element_shift(8), 18u);
  EXPECT_EQ(PageGeometry{9}.element_shift(16), 5u);
}

TEST(Geometry, PageKeysKeepAllSixtyFourBits) {
  // A page number above 2^32 must survive the key round trip (truncation corrupts silently).
  const std::uint64_t page = (std::uint64_t{1} << 39) + 12345;
  const std::uint64_t key = make_page_key(77, page);
  EXPECT_EQ(key_object(key), 77u);
  EXPECT_EQ(key_page(key), page);
  EXPECT_NE(make_page_key(1, 0), make_page_key(0, std::uint64_t{1} << 32));
  EXPECT_NE(key, empty_page_key);
}

TEST(Geometry, PowersOfTwo) {
  EXPECT_TRUE(is_power_of_two(1));
  EXPECT_TRUE(is_power_of_two(4096));
  EXPECT_FALSE(is_power_of_two(0));
  EXPECT_FALSE(is_power_of_two(3 << 10));
  EXPECT_EQ(log2_exact(1), 0u);
  EXPECT_EQ(log2_exact(4096), 12u);
  EXPECT_EQ(log2_exact(std::uint64_t{2} << 20), 21u);
}

}  // namespace
}  // namespace warpvm::detail
