#pragma once
// The placement apps as Workloads: each one's objects (host data, 32-bit words), and how to run
// it on N GPUs three ways: raw (Raw arrays over plain device or managed memory: the single-GPU
// reference, the ideal bound, the real-UVM modes), paged (through a MultiGpuSpace: the page
// policies) and, for most, a host check of the reference's result (references.hpp). The kernels
// are in dense_kernels.cuh and csr_kernels.cuh; warpvm-placement-bench times and checks the
// modes (docs/placement.md).

#include "warpvm/workloads/multi_gpu/csr_kernels.cuh"
#include "warpvm/workloads/multi_gpu/dense_kernels.cuh"
#include "warpvm/workloads/multi_gpu/kernel_support.cuh"
#include "warpvm/workloads/multi_gpu/references.hpp"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/workloads/patterns.hpp"
#include "warpvm/warpvm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::workloads::multi_gpu {

inline constexpr unsigned sweeps = 4;                  ///< stencil2d sweeps inside its one kernel
inline constexpr unsigned iterations = 3;              ///< pagerank launches
inline constexpr std::uint64_t min_fft_points = 4096;  ///< fft's smallest n: 16 chunks, a share for up to 16 GPUs

/// What the raw form's pointers are: a device copy of every object per GPU (the reference, the
/// ideal bound), or one copy that every GPU shares (managed memory: the uvm modes), where what a
/// GPU wrote in one phase must be complete before any GPU reads it in the next.
enum class Copies { per_gpu, shared };

/// A workload's objects, as host data (the inputs), and how to run it three ways.
struct Workload {
  std::string name;
  std::vector<std::vector<std::uint32_t>> objects;  ///< initial contents, as 32-bit words
  std::size_t output;                               ///< the object that holds the result
  std::vector<std::size_t> read_only;               ///< the objects the kernels never write (uvm_read_mostly)
  std::uint64_t useful_bytes;
  /// Rounds of the grid barrier in its one kernel (stencil2d's sweeps, fft's stages); 0: none.
  std::uint32_t barrier_rounds = 0;
  /// Runs the kernel(s) on `gpus` GPUs with the objects given as Raw pointers per GPU.
  std::function<void(const std::vector<std::vector<std::uint32_t*>>&, const std::vector<cudaStream_t>&, unsigned gpus, Copies)>
      raw;
  /// Runs through a space; `objs` are its objects in order.
  std::function<void(MultiGpuSpace&, const std::vector<shared_object<std::uint32_t>>&)> paged;
  /// Optional: checks sampled outputs of the single-GPU reference against a host computation from
  /// the initial objects (that the kernels compute what the workload says); a message if one is off.
  std::function<std::string(const std::vector<std::vector<std::uint32_t>>& objects, const std::vector<std::uint32_t>& output)>
      check_reference;
};

template <class T>
Raw<T> raw_of(std::uint32_t* p, std::uint64_t words, unsigned g, unsigned G) {
  return Raw<T>{reinterpret_cast<T*>(p), words * 4 / sizeof(T), g, G};
}
template <class T>
shared_array<T> as(const shared_array<std::uint32_t>& a) {
  return a.template as<T>();
}

/// An R-MAT graph's parameters and row offsets (rmat_objects).
struct RmatInput {
  RmatParams graph;
  std::vector<std::uint64_t> offsets;
};

/// pagerank's and bfs's graph: the smallest R-MAT (scale at most 28) whose CSR and
/// `vertex_arrays` arrays of 4-byte values per vertex take at least `bytes`. Its row offsets
/// (uint64, two words each) become object 0 of `w` and its columns object 1; the vertex arrays
/// are objects 2 on, left for the caller to fill.
template <class ParallelFor>
RmatInput rmat_objects(Workload& w, std::uint64_t bytes, unsigned vertex_arrays, ParallelFor&& parallel_for) {
  RmatInput in{.graph = {.scale = 4}, .offsets = {}};
  const auto footprint = [&](const RmatParams& p) { return p.csr_bytes() + vertex_arrays * p.vertices() * 4; };
  while (in.graph.scale < 28 && footprint(in.graph) < bytes) ++in.graph.scale;
  const std::uint64_t v = in.graph.vertices();
  in.offsets.resize(v + 1);
  w.objects.resize(2 + vertex_arrays);
  w.objects[1].resize(in.graph.directed_edges());
  build_rmat_csr(in.graph, in.offsets, w.objects[1], parallel_for);
  w.objects[0].resize(2 * (v + 1));
  std::memcpy(w.objects[0].data(), in.offsets.data(), (v + 1) * 8);
  return in;
}

/// The workload `name` (transpose, stencil2d, gemm, pagerank, im2col, conv2d, bfs, fft,
/// transpose_flat) of about `bytes`; nullopt for another name. `device_word`: one unsigned on the
/// first GPU that every GPU reaches (stencil2d's and fft's barrier, bfs's level flag).
/// `parallel_for` (as for build_rmat_csr) spreads the host work: inputs and checks.
template <class ParallelFor>
std::optional<Workload> make_workload(const std::string& name, std::uint64_t bytes, unsigned* device_word,
                                      ParallelFor parallel_for) {
  Workload w;
  w.name = name;
  if (name == "transpose" || name == "transpose_flat") {
    const std::uint64_t n = std::max<std::uint64_t>(32, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)) / 32 * 32);
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 11, parallel_for);
    w.output = 1;
    w.read_only = {0};
    w.useful_bytes = 2 * n * n * 4;
    w.raw = [n](const auto& p, const auto& streams, unsigned G, Copies) {
      for (unsigned g = 0; g < G; ++g) {
        WARPVM_CUDA_TRY(cudaSetDevice(g));
        transpose_kernel<<<1056, dim3(32, 8), 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G),
                                                              raw_of<std::uint32_t>(p[g][1], n * n, g, G), n, n);
      }
    };
    if (name == "transpose_flat")
      w.paged = [n](MultiGpuSpace& s, const auto& o) {
        s.launch(transpose_flat_kernel<std::uint32_t>, dim3(1056), dim3(32, 8), 0, s.flat(), o[0].address(), o[1].address(),
                 n, n);
      };
    else
      w.paged = [n](MultiGpuSpace& s, const auto& o) {
        s.launch(transpose_kernel<shared_array<std::uint32_t>>, dim3(1056), dim3(32, 8), 0, o[0].on(0), o[1].on(0), n, n);
      };
  } else if (name == "stencil2d") {
    const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)));
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 12, parallel_for);
    w.output = sweeps % 2;  // both grids are written (swapped every sweep): none is read-only
    w.barrier_rounds = sweeps;
    w.useful_bytes = sweeps * 2 * n * n * 4;
    // The sweeps on the CPU: the staged kernel's index arithmetic checked against the plain rule.
    w.check_reference = [n, parallel_for](const std::vector<std::vector<std::uint32_t>>& objects,
                                          const std::vector<std::uint32_t>& output) {
      return check_stencil2d(n, sweeps, objects[0], output, parallel_for);
    };
    w.raw = [n, barrier = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      const auto kernel = stencil_kernel<Raw<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, 0);
      zero_device_word(barrier);
      for (unsigned g = 0; g < G; ++g) {
        WARPVM_CUDA_TRY(cudaSetDevice(g));
        kernel<<<blocks, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G), raw_of<std::uint32_t>(p[g][1], n * n, g, G),
                                               n, sweeps, barrier, blocks * G);
      }
    };
    w.paged = [n, barrier = device_word](MultiGpuSpace& s, const auto& o) {
      const auto kernel = stencil_kernel<shared_array<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, s.device(0));
      zero_device_word(barrier);
      s.launch(kernel, dim3(blocks), dim3(chunk_block_warps * 32), 0, o[0].on(0), o[1].on(0), n, sweeps, barrier, blocks * s.gpus());
    };
  } else if (name == "fft") {
    // Two objects of n complex floats (n a power of two, 16 n bytes at most --bytes): the input,
    // and the other half of the stages' ping-pong. Stage t writes object (t + 1) % 2, so both are
    // written (none is read-only) and the result is in object stages % 2.
    const std::uint64_t n = std::max<std::uint64_t>(min_fft_points, std::bit_floor(bytes / 16));
    const auto stages = static_cast<unsigned>(std::countr_zero(n));
    w.objects.assign(2, std::vector<std::uint32_t>(2 * n, 0));
    fill_small_floats(w.objects[0], 31, parallel_for);
    w.output = stages % 2;
    w.barrier_rounds = stages;
    w.useful_bytes = stages * 2 * n * 8;
    // Every bin against host_fft, within Higham's norm-wise bound (check_fft).
    w.check_reference = [n, stages, parallel_for](const std::vector<std::vector<std::uint32_t>>& objects,
                                                  const std::vector<std::uint32_t>& output) {
      return check_fft(n, stages, objects[0], output, parallel_for);
    };
    // Stages are ordered across GPUs by the barrier (system scope): on one shared copy too.
    w.raw = [n, stages, barrier = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      const auto kernel = fft_kernel<Raw<float2>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, 0);
      zero_device_word(barrier);
      for (unsigned g = 0; g < G; ++g) {
        WARPVM_CUDA_TRY(cudaSetDevice(g));
        kernel<<<blocks, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<float2>(p[g][0], 2 * n, g, G),
                                                                  raw_of<float2>(p[g][1], 2 * n, g, G), n, stages, barrier,
                                                                  blocks * G);
        WARPVM_CUDA_TRY(cudaGetLastError());
      }
    };
    w.paged = [n, stages, barrier = device_word](MultiGpuSpace& s, const auto& o) {
      const auto kernel = fft_kernel<shared_array<float2>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), chunk_block_warps * 32, s.device(0));
      zero_device_word(barrier);
      s.launch(kernel, dim3(blocks), dim3(chunk_block_warps * 32), 0, as<float2>(o[0].on(0)), as<float2>(o[1].on(0)), n,
               stages, barrier, blocks * s.gpus());
    };
  } else if (name == "gemm") {
    const std::uint64_t n = std::max<std::uint64_t>(
        gemm_tile_cols, static_cast<std::uint64_t>(std::sqrt(bytes / 12.0)) / gemm_tile_cols * gemm_tile_cols);
    w.objects.assign(3, std::vector<std::uint32_t>(n * n));
    for (int m = 0; m < 2; ++m) fill_small_floats(w.objects[m], static_cast<std::uint64_t>(m), parallel_for);
    w.output = 2;
    w.read_only = {0, 1};
    w.useful_bytes = 3 * n * n * 4;
    // Host spot checks at 4096 sampled elements, exact (check_gemm).
    w.check_reference = [n, parallel_for](const std::vector<std::vector<std::uint32_t>>& objects,
                                          const std::vector<std::uint32_t>& output) {
      return check_gemm(n, objects, output, parallel_for);
    };
    w.raw = [n](const auto& p, const auto& streams, unsigned G, Copies) {
      const unsigned blocks = prepare_gemm<Raw<float>>(G, n, n, n);
      for (unsigned g = 0; g < G; ++g) {
        WARPVM_CUDA_TRY(cudaSetDevice(g));
        gemm_kernel<<<blocks, gemm_threads, gemm_shared_bytes, streams[g]>>>(
            raw_of<float>(p[g][0], n * n, g, G), raw_of<float>(p[g][1], n * n, g, G), raw_of<float>(p[g][2], n * n, g, G), n, n, n);
        WARPVM_CUDA_TRY(cudaGetLastError());
      }
    };
    w.paged = [n](MultiGpuSpace& s, const auto& o) {
      const unsigned blocks = prepare_gemm<shared_array<float>>(s.gpus(), n, n, n);
      s.launch(gemm_kernel<shared_array<float>>, dim3(blocks), dim3(gemm_threads), gemm_shared_bytes, as<float>(o[0].on(0)),
               as<float>(o[1].on(0)), as<float>(o[2].on(0)), n, n, n);
    };
  } else if (name == "pagerank") {
    const auto [graph, offsets] = rmat_objects(w, bytes, 2, parallel_for);
    const std::uint64_t v = graph.vertices();
    w.objects[2].assign(v, 0);
    auto* x = reinterpret_cast<float*>(w.objects[2].data());
    for (std::uint64_t i = 0; i < v; ++i) x[i] = offsets[i + 1] > offsets[i] ? 1.0f / v / (offsets[i + 1] - offsets[i]) : 1.0f / v;
    w.objects[3].assign(v, 0);
    w.output = 2 + iterations % 2;
    w.read_only = {0, 1};  // the graph; both rank arrays are written (swapped every iteration)
    w.useful_bytes = iterations * (graph.csr_bytes() + 2 * v * 4 + graph.directed_edges() * 4);
    w.raw = [v](const auto& p, const auto& streams, unsigned G, Copies) {
      for (unsigned it = 0; it < iterations; ++it) {
        for (unsigned g = 0; g < G; ++g) {
          WARPVM_CUDA_TRY(cudaSetDevice(g));
          pagerank_kernel<<<1056, 256, 0, streams[g]>>>(raw_of<std::uint64_t>(p[g][0], 2 * (v + 1), g, G),
                                                        raw_of<std::uint32_t>(p[g][1], 0, g, G),
                                                        raw_of<float>(p[g][2 + it % 2], v, g, G),
                                                        raw_of<float>(p[g][2 + (it + 1) % 2], v, g, G), v);
        }
        for (unsigned g = 0; g < G; ++g) WARPVM_CUDA_TRY(cudaStreamSynchronize(streams[g]));
      }
    };
    w.paged = [v](MultiGpuSpace& s, const auto& o) {
      for (unsigned it = 0; it < iterations; ++it)
        s.launch(pagerank_kernel<shared_array<std::uint64_t>, shared_array<std::uint32_t>, shared_array<float>>, dim3(1056),
                 dim3(256), 0, as<std::uint64_t>(o[0].on(0)), o[1].on(0), as<float>(o[2 + it % 2].on(0)),
                 as<float>(o[2 + (it + 1) % 2].on(0)), v);
    };
  } else if (name == "bfs") {
    // Objects: row offsets and column indices (read by every GPU: duplication's case) and depth
    // (claimed by every GPU with compare_exchange: access-counter's case); scaled by --bytes as
    // pagerank is, with one vertex array instead of two.
    const auto [graph, offsets] = rmat_objects(w, bytes, 1, parallel_for);
    const std::uint64_t v = graph.vertices();
    // The root: the vertex of highest degree (the least such id), so that the search reaches
    // R-MAT's giant component.
    std::uint32_t root = 0;
    for (std::uint64_t u = 1; u < v; ++u)
      if (offsets[u + 1] - offsets[u] > offsets[root + 1] - offsets[root]) root = static_cast<std::uint32_t>(u);
    w.objects[2].assign(v, bfs_unreached);
    w.objects[2][root] = 0;
    w.output = 2;
    w.read_only = {0, 1};  // the graph; depth is claimed into
    // The CPU reference (rmat.hpp's reference_bfs, independent of the kernels).
    std::vector<std::uint32_t> levels = reference_bfs(offsets, w.objects[1], root, parallel_for);
    std::uint32_t deepest = 0;
    std::uint64_t reached = 0;
    for (const std::uint32_t d : levels)
      if (d != bfs_unreached) {
        deepest = std::max(deepest, d);
        ++reached;
      }
    std::fprintf(stderr, "bfs: R-MAT scale %u, root %u, %llu of %llu vertices reached, %u levels\n", graph.scale, root,
                 static_cast<unsigned long long>(reached), static_cast<unsigned long long>(v), deepest + 1);
    // The graph once, and depth once per launch (deepest + 1 levels, the last claiming nothing).
    w.useful_bytes = graph.csr_bytes() + (std::uint64_t{deepest} + 1) * v * 4;
    w.check_reference = [levels = std::move(levels)](const std::vector<std::vector<std::uint32_t>>&,
                                                     const std::vector<std::uint32_t>& output) -> std::string {
      for (std::uint64_t u = 0; u < levels.size(); ++u)
        if (output[u] != levels[u])
          return "bfs: depth[" + std::to_string(u) + "] = " + std::to_string(output[u]) + ", CPU BFS " + std::to_string(levels[u]);
      return {};
    };
    w.raw = [v, reached_word = device_word](const auto& p, const auto& streams, unsigned G, Copies) {
      run_bfs_levels(reached_word, [&](std::uint32_t level) {
        for (unsigned g = 0; g < G; ++g) {
          WARPVM_CUDA_TRY(cudaSetDevice(g));
          // Depth: the first GPU's copy for every GPU, updated by the others with peer atomics (the
          // ideal bound's bfs: on copies of their own no GPU would see the vertices the others claim).
          bfs_level_kernel<<<1056, 256, 0, streams[g]>>>(raw_of<std::uint64_t>(p[g][0], 2 * (v + 1), g, G),
                                                         raw_of<std::uint32_t>(p[g][1], 0, g, G),
                                                         raw_of<std::uint32_t>(p[0][2], v, g, G), v, level, reached_word);
          WARPVM_CUDA_TRY(cudaGetLastError());
        }
        for (unsigned g = 0; g < G; ++g) WARPVM_CUDA_TRY(cudaStreamSynchronize(streams[g]));
      });
    };
    w.paged = [v, reached_word = device_word](MultiGpuSpace& s, const auto& o) {
      run_bfs_levels(reached_word, [&](std::uint32_t level) {
        s.launch(bfs_level_kernel<shared_array<std::uint64_t>, shared_array<std::uint32_t>, shared_array<std::uint32_t>>,
                 dim3(1056), dim3(256), 0, as<std::uint64_t>(o[0].on(0)), o[1].on(0), o[2].on(0), v, level, reached_word);
        s.synchronize();
      });
    };
  } else if (name == "im2col" || name == "conv2d") {
    // conv2d: im2col, GEMM (filters x col), transpose to pixel-major: three explicit phases, the
    // objects' patterns changing between them (col: private writes, then shared reads; out:
    // written by several GPUs per page, then shared reads). im2col alone is its first phase.
    const bool conv = name == "conv2d";
    // Sides: multiples of 16 for conv2d (its GEMM's n, height x width, a multiple of the 256-column
    // tile), of 8 for im2col (as before: its shapes unchanged).
    const ConvShape c = conv ? ConvShape::at_least(bytes, 10 * conv_channels + 2 * conv_filters, conv_filters * 9 * conv_channels, 16)
                             : ConvShape::at_least(bytes, 10 * conv_channels, 0, 8);
    const std::uint64_t hw = c.pixels(), taps = c.taps(), k = c.filters;
    w.objects.resize(conv ? 5 : 2);
    w.objects[0].resize(c.channels * hw);  // the image
    fill_small_floats(w.objects[0], 21, parallel_for);
    if (conv) {
      w.objects[1].resize(k * taps);  // the filters
      fill_small_floats(w.objects[1], 22, parallel_for);
      w.objects[2].assign(taps * hw, 0);  // col
      w.objects[3].assign(k * hw, 0);     // out, filter-major
      w.objects[4].assign(hw * k, 0);     // the result, pixel-major
    } else {
      w.objects[1].assign(taps * hw, 0);  // col
    }
    w.output = conv ? 4 : 1;
    w.read_only = conv ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{0};  // the image (and the filters)
    w.useful_bytes = 4 * (c.channels * hw + taps * hw) + (conv ? 4 * (k * taps + taps * hw + k * hw) + 2 * 4 * k * hw : 0);
    const auto channels = static_cast<std::uint32_t>(c.channels), height = static_cast<std::uint32_t>(c.height),
               width = static_cast<std::uint32_t>(c.width);
    w.raw = [=](const auto& p, const auto& streams, unsigned G, Copies copies) {
      // Stream order separates the phases on each GPU, all the order its own copies need. On one
      // shared copy a phase reads what other GPUs wrote in the one before (GEMM reads every row
      // of col, the transpose other GPUs' tiles of out), so every GPU finishes a phase before
      // any starts the next (as the paged form's launches do).
      const auto each_gpu = [&](const auto& launch) {
        for (unsigned g = 0; g < G; ++g) {
          WARPVM_CUDA_TRY(cudaSetDevice(g));
          launch(g);
        }
      };
      const auto phase_boundary = [&] {
        if (copies == Copies::shared)
          for (unsigned g = 0; g < G; ++g) WARPVM_CUDA_TRY(cudaStreamSynchronize(streams[g]));
      };
      const auto col = [&](unsigned g) { return raw_of<float>(p[g][conv ? 2 : 1], taps * hw, g, G); };
      const auto out = [&](unsigned g) { return raw_of<float>(p[g][3], k * hw, g, G); };
      each_gpu([&](unsigned g) {
        im2col_kernel<<<1056, chunk_block_warps * 32, 0, streams[g]>>>(raw_of<float>(p[g][0], c.channels * hw, g, G), col(g), channels, height, width);
      });
      if (!conv) return;
      phase_boundary();
      const unsigned gemm_blocks = prepare_gemm<Raw<float>>(G, k, hw, taps);
      each_gpu([&](unsigned g) {
        gemm_kernel<<<gemm_blocks, gemm_threads, gemm_shared_bytes, streams[g]>>>(raw_of<float>(p[g][1], k * taps, g, G), col(g),
                                                                                 out(g), k, hw, taps);
        WARPVM_CUDA_TRY(cudaGetLastError());
      });
      phase_boundary();
      each_gpu([&](unsigned g) {
        transpose_kernel<<<1056, dim3(32, 8), 0, streams[g]>>>(out(g), raw_of<float>(p[g][4], hw * k, g, G), k, hw);
      });
    };
    // Host spot checks at 4096 sampled outputs: im2col exactly, conv2d against a direct
    // convolution (check_conv).
    w.check_reference = [conv, c](const std::vector<std::vector<std::uint32_t>>& objects,
                                  const std::vector<std::uint32_t>& output) { return check_conv(conv, c, objects, output); };
    w.paged = [=](MultiGpuSpace& s, const auto& o) {
      const auto col = as<float>(o[conv ? 2 : 1].on(0));
      s.launch(im2col_kernel<shared_array<float>, shared_array<float>>, dim3(1056), dim3(chunk_block_warps * 32), 0, as<float>(o[0].on(0)), col,
               channels, height, width);
      if (!conv) return;
      const auto out = as<float>(o[3].on(0));
      const unsigned gemm_blocks = prepare_gemm<shared_array<float>>(s.gpus(), k, hw, taps);
      s.launch(gemm_kernel<shared_array<float>>, dim3(gemm_blocks), dim3(gemm_threads), gemm_shared_bytes, as<float>(o[1].on(0)),
               col, out, k, hw, taps);
      s.launch(transpose_kernel<shared_array<float>>, dim3(1056), dim3(32, 8), 0, out, as<float>(o[4].on(0)), k, hw);
    };
  } else {
    return std::nullopt;
  }
  return w;
}

}  // namespace warpvm::workloads::multi_gpu
