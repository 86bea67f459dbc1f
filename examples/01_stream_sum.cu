// Sum an array larger than the cache you give warpvm: the data lives in pinned host memory,
// pages move into a 256 MiB device cache on demand, and the result is checked on the host.
//
//   build/examples/warpvm-example-stream-sum [GiB]

#include <warpvm/warpvm.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

__global__ void sum_pages(warpvm::array<std::uint32_t> data, unsigned long long* total) {
  // Each warp walks whole pages: one acquisition per page, then plain loads.
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t pages = (data.size() + data.elements_per_page() - 1) / data.elements_per_page();
  unsigned long long s = 0;
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto page = data.span(p * data.elements_per_page());
    for (std::uint32_t j = threadIdx.x % 32; j < page.size(); j += 32) s += page[j];
  }
  atomicAdd(total, s);
}

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  if (warpvm::device_count() == 0) {
    std::printf("no CUDA GPU visible: this example needs one\n");
    return 0;
  }
  try {
    warpvm::Runtime rt({.cache_bytes = 256ull << 20});
    auto data = rt.alloc<std::uint32_t>(static_cast<std::size_t>(gib * (1ull << 30) / 4), warpvm::Placement::migrate,
                                        "data");
    for (std::size_t i = 0; i < data.size(); ++i) data.host()[i] = static_cast<std::uint32_t>(i * 2654435761u);
    const unsigned long long expected = std::accumulate(data.host().begin(), data.host().end(), 0ull);

    unsigned long long* total = nullptr;
    WARPVM_CUDA_TRY(cudaMalloc(&total, sizeof *total));
    WARPVM_CUDA_TRY(cudaMemset(total, 0, sizeof *total));
    const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(rt.max_resident_threads() / 256, 528));
    rt.launch(sum_pages, dim3(blocks), dim3(256), 0, data.device(), total);
    rt.synchronize();
    unsigned long long got = 0;
    WARPVM_CUDA_TRY(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
    cudaFree(total);

    const warpvm::Stats stats = rt.stats();
    std::printf("%.1f GiB through a %.0f MiB cache: sum %s; %llu pages in, %llu evictions\n", gib,
                rt.cache_bytes() / double(1 << 20), got == expected ? "correct" : "WRONG",
                static_cast<unsigned long long>(stats.pages_in()), static_cast<unsigned long long>(stats.evictions));
    return got == expected ? 0 : 1;
  } catch (const warpvm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
