#pragma once
/// @file
/// Project-prefixed execution-space macros: shared headers compile in plain host compilers
/// (host unit tests, the simulator) and in nvcc (kernels).

#if defined(__CUDACC__)
#define WARPVM_HD __host__ __device__
#define WARPVM_DEVICE __device__
#else
#define WARPVM_HD
#define WARPVM_DEVICE
#endif

#define WARPVM_HD_INLINE WARPVM_HD inline

// The device code uses warp reductions (__reduce_*_sync) and other sm_80 features: a build for
// an older architecture (CMake's default with nvcc 13 is 75) gets this message, not a missing
// intrinsic deep in a header.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "warpvm's device code needs compute capability 8.0 or newer: set CMAKE_CUDA_ARCHITECTURES (warpvm's default is 90)"
#endif
