// An empty warpvm::object (default-constructed; a moved-from one is the GPU suite's, in
// tests/core/api_test.cu) raises a clear error on use instead of dereferencing a null state.

#include "warpvm/runtime.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace warpvm {
namespace {

void expect_empty_object_error(const std::function<void()>& use) {
  try {
    use();
    FAIL() << "expected an empty object to be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("empty warpvm::object"), std::string::npos) << e.what();
  }
}

TEST(Object, AnEmptyObjectRaisesOnEveryUse) {
  object<float> empty;
  expect_empty_object_error([&] { (void)empty.device(); });
  expect_empty_object_error([&] { (void)empty.host(); });
  expect_empty_object_error([&] { (void)empty.size(); });
  expect_empty_object_error([&] { (void)empty.bytes(); });
  expect_empty_object_error([&] { (void)empty.id(); });
  expect_empty_object_error([&] { (void)empty.name(); });
  expect_empty_object_error([&] { (void)empty.placement(); });
  expect_empty_object_error([&] { empty.set_placement(Placement::remote); });
}

TEST(Object, AnEmptyObjectIsDestroyedAndAssignedQuietly) {
  object<int> a;
  object<int> b;
  EXPECT_NO_THROW(a = std::move(b));
}

}  // namespace
}  // namespace warpvm
