// Linked lists whose nodes are spread over two objects of a MultiGpuSpace, walked on every GPU
// of the space through flat addresses (OASIS-InMem's raw pointers: each node holds the flat
// address of the next), with OASIS choosing each object's page policy. Every list's sum is
// checked on the host, and the space's counters say how the pages were served. The space spans
// every visible GPU, so those must all have peer access to each other (choose them with
// CUDA_VISIBLE_DEVICES, e.g. =0 for one).
//
//   build/examples/warpvm-example-multi-gpu-lists [lists] [nodes per list]

#include <warpvm/warpvm.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <random>
#include <vector>

struct Node {
  warpvm::flat_address next;  // 0 ends the list
  std::uint32_t value;
  std::uint32_t unused;
};

// Each GPU walks its own contiguous share of the lists (so each page of `sums` has one writer): a
// chain of dependent loads by flat address per list, each finding its node's object in the
// shadow map and its page through that object's table.
__global__ void walk_lists(warpvm::flat_view flat, warpvm::shared_array<warpvm::flat_address> heads,
                           warpvm::shared_array<std::uint64_t> sums) {
  const std::uint64_t first = heads.size() * flat.gpu() / flat.gpus(), end = heads.size() * (flat.gpu() + 1) / flat.gpus();
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t l = first + std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; l < end; l += stride) {
    std::uint64_t sum = 0;
    for (warpvm::flat_address at = heads.load(l); at != 0;) {
      const Node node = flat.load<Node>(at);
      sum += node.value;
      at = node.next;
    }
    sums.store(l, sum);
  }
}

int main(int argc, char** argv) {
  const long lists = argc > 1 ? std::atol(argv[1]) : 65536;
  const long length = argc > 2 ? std::atol(argv[2]) : 64;
  if (lists < 1 || length < 1) {
    std::fprintf(stderr, "usage: warpvm-example-multi-gpu-lists [lists >= 1] [nodes per list >= 1]\n");
    return 2;
  }
  if (warpvm::device_count() == 0) {
    std::printf("no CUDA GPU visible: this example needs one\n");
    return 0;
  }
  try {
    warpvm::MultiGpuSpace space;  // every visible GPU, a 1 GiB frame pool on each
    const auto total = static_cast<std::uint64_t>(lists) * static_cast<std::uint64_t>(length);
    const std::uint64_t half = (total + 1) / 2;
    const warpvm::shared_object<Node> nodes[] = {space.alloc<Node>(half, std::nullopt, "nodes 0"),
                                                 space.alloc<Node>(std::max<std::uint64_t>(total - half, 1), std::nullopt,
                                                                   "nodes 1")};
    auto heads = space.alloc<warpvm::flat_address>(static_cast<std::size_t>(lists), std::nullopt, "heads");
    auto sums = space.alloc<std::uint64_t>(static_cast<std::size_t>(lists), std::nullopt, "sums");

    // Node slots in random order, each in either object: consecutive nodes of a list land anywhere.
    std::vector<std::uint64_t> slots(total);
    std::iota(slots.begin(), slots.end(), 0);
    std::mt19937_64 rng(2026);
    std::shuffle(slots.begin(), slots.end(), rng);
    const auto address_of = [&](std::uint64_t slot) {
      const unsigned object = slot < half ? 0 : 1;
      return nodes[object].address() + (slot - object * half) * sizeof(Node);
    };
    const auto node_at = [&](std::uint64_t slot) -> Node& {
      const unsigned object = slot < half ? 0 : 1;
      return nodes[object].host()[slot - object * half];
    };
    std::vector<std::uint64_t> expected(static_cast<std::size_t>(lists), 0);
    for (long l = 0; l < lists; ++l) {
      heads.host()[l] = address_of(slots[l * length]);
      for (long k = 0; k < length; ++k) {
        const std::uint64_t slot = slots[l * length + k];
        Node& node = node_at(slot);
        node.value = static_cast<std::uint32_t>(rng());
        node.next = k + 1 < length ? address_of(slots[l * length + k + 1]) : 0;
        expected[l] += node.value;
      }
    }

    space.launch(walk_lists, dim3(264), dim3(256), 0, space.flat(), heads.on(0), sums.on(0));
    space.flush();
    const long wrong = std::inner_product(expected.begin(), expected.end(), sums.host().begin(), 0L, std::plus<>(),
                                          [](std::uint64_t a, std::uint64_t b) { return a != b ? 1L : 0L; });
    const warpvm::GpuPlacementStats s = space.stats().total();
    std::printf("%ld lists of %ld nodes in two objects on %u GPU(s): %s; %llu first touches, %llu shared faults, "
                "%llu replications, %llu remote accesses, %.1f MiB over NVLink\n",
                lists, length, space.gpus(), wrong == 0 ? "every sum correct" : "WRONG SUMS",
                static_cast<unsigned long long>(s.first_touches), static_cast<unsigned long long>(s.shared_faults),
                static_cast<unsigned long long>(s.replications), static_cast<unsigned long long>(s.remote_accesses),
                static_cast<double>(s.nvlink_bytes) / (1 << 20));
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {  // warpvm::Error, or the host running out of memory for large lists
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
