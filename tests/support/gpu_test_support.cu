// Entry point of the GPU suite: names the device it runs on, or says plainly there is none.

#include "gpu_test_support.cuh"

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (warpvm::device_count() == 0) {
    std::printf("warpvm GPU tests: no CUDA device visible; every GPU test is skipped\n");
  } else {
    cudaDeviceProp prop{};
    int host_atomics = 0;
    cudaDeviceGetAttribute(&host_atomics, cudaDevAttrHostNativeAtomicSupported, 0);
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
      std::printf("warpvm GPU tests on %s (sm_%d%d, %d SMs, host-native atomics %s)\n", prop.name, prop.major,
                  prop.minor, prop.multiProcessorCount, host_atomics != 0 ? "yes" : "no");
  }
  return RUN_ALL_TESTS();
}
