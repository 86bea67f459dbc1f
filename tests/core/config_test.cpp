#include "warpvm/config.hpp"
#include "warpvm/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace warpvm {
namespace {

void expect_invalid(const Config& config, const std::string& mentions) {
  try {
    config.validate();
    FAIL() << "expected invalid_config mentioning " << mentions;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(Config, DefaultsAreValid) { EXPECT_NO_THROW(Config{}.validate()); }

TEST(Config, PageSizeMustBeAPowerOfTwoBetween512BAnd2MiB) {
  for (std::size_t ok : {512u, 4096u, 65536u, 2u << 20}) EXPECT_NO_THROW((Config{.page_bytes = ok}.validate()));
  for (std::size_t bad : {0u, 256u, 3000u, 4u << 20, 6144u}) expect_invalid(Config{.page_bytes = bad}, "page_bytes");
}

TEST(Config, CacheFractionMustBeSensible) {
  expect_invalid(Config{.cache_fraction_of_free = 0.0}, "cache_fraction_of_free");
  expect_invalid(Config{.cache_fraction_of_free = 0.99}, "cache_fraction_of_free");
  EXPECT_NO_THROW((Config{.cache_bytes = 1 << 20, .cache_fraction_of_free = 0.0}.validate()));
}

TEST(Config, CacheMustHoldAPage) {
  expect_invalid(Config{.cache_bytes = 100}, "smaller than one page");
}

TEST(Config, HoldsAndObjects) {
  expect_invalid(Config{.max_pages_held_per_thread = 0}, "max_pages_held_per_thread");
  expect_invalid(Config{.max_objects = 0}, "max_objects");
  expect_invalid(Config{.watchdog_seconds = 0}, "watchdog_seconds");
  expect_invalid(Config{.watchdog_seconds = 1e300}, "watchdog_seconds");
  expect_invalid(Config{.eviction = static_cast<EvictionPolicy>(7)}, "eviction");
}

TEST(Config, DescribeNamesTheChoices) {
  const std::string text = Config{.cache_bytes = 1 << 30, .eviction = EvictionPolicy::fifo, .checked = true}.describe();
  EXPECT_NE(text.find("fifo"), std::string::npos);
  EXPECT_NE(text.find("checked=on"), std::string::npos);
  EXPECT_NE(text.find("1073741824"), std::string::npos);
}

TEST(Error, CarriesKindAndLocation) {
  try {
    WARPVM_EXPECTS(false, ErrorKind::invalid_argument, "bad thing");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("bad thing"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("config_test.cpp"), std::string::npos);
    return;
  }
  FAIL();
}

}  // namespace
}  // namespace warpvm
