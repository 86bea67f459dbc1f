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
