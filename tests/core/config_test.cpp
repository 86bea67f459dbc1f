#include "warpvm/config.hpp"
#include "warpvm/error.hpp"

#include <gtest/gtest.h>

#include <limits>
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

TEST(Config, ResidentFramesNeedGpuInitiatedTransfersAndFitFrameNumbers) {
  EXPECT_NO_THROW((Config{.cache_bytes = 1u << 20, .resident_bytes = 64u << 20}.validate()));
  Config uvm = Config::preset(Preset::uvm);
  uvm.resident_bytes = 1u << 20;
  expect_invalid(uvm, "resident_bytes needs the gpu_initiated transport");
  expect_invalid(Config{.cache_bytes = 1u << 20, .resident_bytes = std::size_t{1} << 44, .page_bytes = 4096},
                 "come to 2^32 frames");
  expect_invalid(Config{.cache_bytes = std::size_t{1} << 44, .page_bytes = 4096}, "come to 2^32 frames");
}

TEST(Config, HoldsAndObjects) {
  expect_invalid(Config{.max_pages_held_per_thread = 0}, "max_pages_held_per_thread");
  expect_invalid(Config{.max_objects = 0}, "max_objects");
  expect_invalid(Config{.watchdog_seconds = 0}, "watchdog_seconds");
  expect_invalid(Config{.watchdog_seconds = 1e300}, "watchdog_seconds");
  expect_invalid(Config{.automatic_remote_share = -0.01}, "automatic_remote_share");
  expect_invalid(Config{.automatic_remote_share = 1.5}, "automatic_remote_share");
  expect_invalid(Config{.automatic_remote_share = std::numeric_limits<double>::quiet_NaN()}, "automatic_remote_share");
  for (double ok : {0.0, 1.0 / 16, 1.0}) EXPECT_NO_THROW((Config{.automatic_remote_share = ok}.validate()));
  expect_invalid(Config{.automatic_remote_share_evicting = -1.0}, "automatic_remote_share_evicting");
  expect_invalid(Config{.automatic_remote_share_evicting = 65.0}, "automatic_remote_share_evicting");
  expect_invalid(Config{.automatic_remote_share_evicting = std::numeric_limits<double>::quiet_NaN()},
                 "automatic_remote_share_evicting");
  for (double ok : {0.0, 1.0, 64.0}) EXPECT_NO_THROW((Config{.automatic_remote_share_evicting = ok}.validate()));
  expect_invalid(Config{.eviction = static_cast<EvictionPolicy>(7)}, "eviction");
}

TEST(Config, DescribeNamesTheChoices) {
  const std::string text = Config{.cache_bytes = 1 << 30, .eviction = EvictionPolicy::fifo, .checked = true}.describe();
  EXPECT_NE(text.find("fifo"), std::string::npos);
  EXPECT_NE(text.find("checked=on"), std::string::npos);
  EXPECT_NE(text.find("1073741824"), std::string::npos);
}

TEST(Config, PresetsSetTheirPolicies) {
  EXPECT_EQ(Config::preset(Preset::warpvm).eviction, EvictionPolicy::clock);
  EXPECT_EQ(Config::preset(Preset::warpvm).transport, Transport::gpu_initiated);
  EXPECT_EQ(Config::preset(Preset::dream).eviction, EvictionPolicy::fifo);
  EXPECT_EQ(Config::preset(Preset::dream).transport, Transport::gpu_initiated);
  const Config uvm = Config::preset(Preset::uvm);
  EXPECT_EQ(uvm.transport, Transport::host_batched);
  EXPECT_EQ(uvm.page_bytes, 4096u);
  EXPECT_EQ(uvm.fault_batch_size, 256u);
  EXPECT_TRUE(uvm.prefetch);
  for (Preset p : {Preset::warpvm, Preset::dream, Preset::uvm}) EXPECT_NO_THROW(Config::preset(p).validate()) << to_string(p);
  EXPECT_NE(uvm.describe().find("transport=host_batched batch=256 prefetch=on"), std::string::npos) << uvm.describe();
}

TEST(Config, HostBatchedServesFourKilobytePagesInSaneBatches) {
  Config big_pages = Config::preset(Preset::uvm);
  big_pages.page_bytes = 65536;
  expect_invalid(big_pages, "4 KB pages");
  Config empty_batches = Config::preset(Preset::uvm);
  empty_batches.fault_batch_size = 0;
  expect_invalid(empty_batches, "fault_batch_size");
}

TEST(Config, FaultEventsNeedTheRecorderBuilt) {
  Config config;
  config.fault_event_capacity = 1024;
  if (WARPVM_FAULT_EVENTS)
    EXPECT_NO_THROW(config.validate());
  else
    expect_invalid(config, "-DWARPVM_FAULT_EVENTS=ON");
  config.fault_event_capacity = (std::size_t{1} << 32) + 1;
  expect_invalid(config, "fault_event_capacity");
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
