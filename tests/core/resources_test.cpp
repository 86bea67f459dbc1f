// The hook every allocation, registration and thread start of the library goes through
// (detail/core/resources.hpp): which call it fails, how it counts, and the error a thread
// start that fails becomes. The GPU suite takes every failure path with it
// (tests/core/resources_gpu_test.cu).

#include "warpvm/detail/core/resources.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace warpvm::detail {
namespace {

TEST(Resources, OnlyTheNthCallOfTheArmedKindFails) {
  fail_nth_call(Resource::pinned_memory, 3);
  EXPECT_FALSE(injected_failure(Resource::pinned_memory));
  EXPECT_FALSE(injected_failure(Resource::device_memory)) << "another kind is not armed";
  EXPECT_FALSE(injected_failure(Resource::pinned_memory));
  EXPECT_TRUE(injected_failure(Resource::pinned_memory));
  EXPECT_FALSE(injected_failure(Resource::pinned_memory)) << "the calls after the Nth succeed";
  EXPECT_EQ(calls_since_armed(Resource::pinned_memory), 4u);
  EXPECT_EQ(calls_since_armed(Resource::device_memory), 0u);
  fail_nth_call(Resource::pinned_memory, 0);
  EXPECT_FALSE(injected_failure(Resource::pinned_memory));
  EXPECT_EQ(calls_since_armed(Resource::pinned_memory), 0u) << "disarmed: nothing is counted";
}

TEST(Resources, LiveCountsFollowAcquisitionsAndReleases) {
  const std::int64_t before = live_count(Resource::host_registration);
  count_live(Resource::host_registration, +1);
  count_live(Resource::host_registration, +1);
  EXPECT_EQ(live_count(Resource::host_registration), before + 2);
  count_live(Resource::host_registration, -1);
  count_live(Resource::host_registration, -1);
  EXPECT_EQ(live_count(Resource::host_registration), before);
}

TEST(Resources, AThreadThatCannotStartIsAnOutOfMemoryErrorNamingIt) {
  fail_nth_call(Resource::host_thread, 1);
  bool ran = false;
  try {
    std::thread t = start_thread([&] { ran = true; }, "the test's thread");
    t.join();
    FAIL() << "expected the injected failure";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("could not start the test's thread"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ran);
  std::thread second = start_thread([&] { ran = true; }, "the test's thread");  // only the first failed
  second.join();
  EXPECT_TRUE(ran);
  fail_nth_call(Resource::host_thread, 0);
}

}  // namespace
}  // namespace warpvm::detail
