// warpvm-channel-bench: producer/consumer workloads of issue #7, CPU to GPU and GPU to GPU, each
// checked against a host reference with fresh random inputs (--seed to repeat one):
//
//   tiles  a host thread publishes N image tiles, one every `interval` microseconds; consumer
//          warps blur each tile (3x3 box sum) into device memory (channel_workloads.cuh)
//   cg     conjugate gradient, CPU and GPU alternating every iteration (channel_workloads.cuh)
//   halo   a 3D cube whose six face halos the host produces every iteration (channel_workloads.cuh)
//   stencil2gpu  GPU to GPU: a 2D stencil on a grid split between GPUs 0 and 1, each GPU producing
//          its boundary row for the other every iteration (stencil2gpu.cuh; its runner in
//          pair_runners.cuh, with the modes channel, channel_direct, channel_warp, peer_flag, naive
//          and atomic_wait)
//   kmeans2gpu  GPU to GPU: k-means (integer points, 4 dimensions) over points split between GPUs 0
//          and 1, each GPU producing its per-centroid partial sums for the other every iteration
//          (kmeans2gpu.cuh; a runner on the same GpuPair as stencil2gpu, the same modes)
//   gemm2gpu  GPU to GPU: C = (A B) D, each GPU producing its rows of T = A B panel by panel and
//          streaming each panel to the other, both consuming all of T (gemm2gpu.cuh; same modes)
//   bfs2gpu  GPU to GPU: BFS over an R-MAT graph whose vertices are split between the GPUs, each
//          sending the other a bitmap of the other's vertices it reached every level (bfs2gpu.cuh)
//   bitonic2gpu  GPU to GPU: the last merge of a bitonic sort across the GPUs, each streaming its
//          sorted half to the other in chunks, then merging its bitonic result (bitonic2gpu.cuh)
//   pingpong2gpu  GPU to GPU: one block per GPU handing a 128-byte message back and forth: the
//          round trip of each mode, with nothing to hide it (pingpong2gpu.cuh)
//
// In every CPU-to-GPU kernel, compute blocks run independent work (an integer hash chain) next to the
// consumer blocks, so there is something to hide waiting behind. The ways consumers meet the data
// (--modes: channel, pinned_flag, naive, atomic_wait CPU to GPU; channel, channel_direct,
// channel_warp, peer_flag, naive, atomic_wait GPU to GPU) are described at WaitMode
// (wait_modes.cuh).
//
// The workloads live in workloads/include/warpvm/workloads/channel/ (the CPU-to-GPU ones in
// cpu_workloads.cuh on cpu_harness.cuh, the GPU-to-GPU ones in pair_runners.cuh on gpu_pair.cuh);
// this program is their flags and list. JSON Lines (bench/common's Recorder, channel_records.cuh),
// one record per workload, mode and consumer count; the metrics (overlap_efficiency, wait_share,
// monitor shares) are defined in docs/bench/channel.md.

#include "channel_records.cuh"
#include "cli.hpp"
#include "harness.cuh"
#include "warpvm/workloads/channel/cpu_workloads.cuh"
#include "warpvm/workloads/channel/pair_runners.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <sched.h>

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "channel";
  options.repeats = 5;
  options.modes = {"channel", "channel_direct", "channel_warp", "pinned_flag", "peer_flag", "naive", "atomic_wait"};
  Setup setup;
  setup.seed = std::random_device{}();
  std::vector<std::string> workloads{"tiles", "cg", "halo"};
  std::vector<std::uint32_t> thread_sweep;
  CLI::App app{"warpvm-channel-bench: CPU-to-GPU and GPU-to-GPU producer/consumer workloads, JSON Lines out.\n"
               "CPU to GPU: tiles, cg, halo (the default). GPU to GPU, on GPUs 0 and 1: stencil2gpu, kmeans2gpu, gemm2gpu,\n"
               "bfs2gpu, bitonic2gpu, pingpong2gpu. Modes: channel, channel_direct, channel_warp, pinned_flag, peer_flag,\n"
               "naive, atomic_wait (each workload runs those it has).",
               "warpvm-channel-bench"};
  add_shared_options(app, options);
  warpvm::cli::add_list(app, "--workloads", workloads, "workloads to run");
  app.add_option("--seed", setup.seed, "seed of the inputs (default: random)");
  app.add_option("--tiles", setup.tiles, "tiles: tiles produced");
  app.add_option("--side", setup.side, "tiles: a tile's side (even)");
  app.add_option("--consumer-threads", setup.consumer_threads, "tiles: consumer threads (0: 256 per SM)");
  app.add_option("--compute-blocks", setup.compute_blocks, "blocks of the compute kernel (0: two per SM)");
  app.add_option("--compute-iters", setup.compute_iters, "the compute kernel's iterations");
  app.add_option("--cg-rows", setup.cg_rows, "cg: rows");
  app.add_option("--cg-rows-per-warp", setup.cg_rows_per_warp, "cg: rows per warp");
  app.add_option("--cg-iterations", setup.cg_iterations, "cg: iterations");
  app.add_option("--halo-side", setup.halo_side, "halo: the cube's side (a multiple of 8)");
  app.add_option("--halo-iterations", setup.halo_iterations, "halo: iterations");
  app.add_option("--stencil-side", setup.stencil_side, "stencil2gpu: side (a multiple of 64)");
  app.add_option("--stencil-iterations", setup.stencil_iterations, "stencil2gpu: iterations");
  app.add_option("--kmeans-points", setup.kmeans_points, "kmeans2gpu: points (even, at least 2 k, at most 2^26; half per GPU)");
  app.add_option("--kmeans-k", setup.kmeans_k, "kmeans2gpu: centroids (a multiple of 8 up to 1024)");
  app.add_option("--kmeans-iterations", setup.kmeans_iterations, "kmeans2gpu: iterations (1 to 1000)");
  app.add_option("--gemm-side", setup.gemm_side, "gemm2gpu: side (a multiple of 128 up to 8192)");
  app.add_option("--bfs-scale", setup.bfs_scale, "bfs2gpu: 2^scale vertices (11 to 30)");
  app.add_option("--bfs-edge-factor", setup.bfs_edge_factor, "bfs2gpu: edge factor");
  app.add_option("--bfs-max-levels", setup.bfs_max_levels, "bfs2gpu: levels (1 to 4096; a search whose deepest vertex is at depth D needs D + 2)");
  app.add_option("--bitonic-keys", setup.bitonic_keys, "bitonic2gpu: keys (a multiple of 2^17 up to 2^30)");
  app.add_option("--pingpong-iterations", setup.pingpong_iterations, "pingpong2gpu: round trips (1 to 65536)");
  app.add_option("--interval-us", setup.interval_us, "tiles: the host producer's interval between tiles");
  warpvm::cli::add_list(app, "--consumer-threads-sweep", thread_sweep, "tiles: consumer thread counts to sweep (each >= 32)");
  for (const auto& [flag, on_consumer] :
       {std::pair{"--stencil-direct-buffer", &setup.stencil_direct_buffer_on_consumer},
        std::pair{"--kmeans-direct-buffer", &setup.kmeans_direct_buffer_on_consumer},
        std::pair{"--gemm-direct-buffer", &setup.gemm_direct_buffer_on_consumer},
        std::pair{"--bfs-direct-buffer", &setup.bfs_direct_buffer_on_consumer},
        std::pair{"--bitonic-direct-buffer", &setup.bitonic_direct_buffer_on_consumer}})
    app.add_option_function<std::string>(
           flag, [on_consumer](const std::string& value) { *on_consumer = value == "consumer"; },
           "channel_direct, channel_warp: the buffer in the consuming GPU's memory (consumer) or the producing GPU's, "
           "as channel (producer)")
        ->check(CLI::IsMember({"producer", "consumer"}));
  app.add_option("--timeline", setup.timeline_csv, "append each mode's last run's warp stamps to this CSV");
  app.add_option("--monitor-cpu", setup.monitor_cpu,
                 "CPU to GPU: the host CPU of the channel's monitor (-1: the OS places it)")
      ->check(CLI::Range(-1, CPU_SETSIZE - 1));
  app.add_option("--producer-cpu", setup.producer_cpu, "CPU to GPU: the host CPU of the host producer (-1: the OS places it)")
      ->check(CLI::Range(-1, CPU_SETSIZE - 1));
  warpvm::cli::parse(app, argc, argv);
  const auto usage = [&app](const std::string& message) { warpvm::cli::refuse(app, message); };
  if (options.repeats < 1) usage("--repeats must be at least 1");
  if (setup.side < 2 || setup.side % 2 != 0 || setup.tiles == 0) usage("tiles: --side must be even and >= 2, --tiles >= 1");
  if (setup.cg_rows_per_warp == 0 || setup.cg_rows % (setup.cg_rows_per_warp * warpvm::workloads::block_warps) != 0 ||
      setup.cg_rows_per_warp < warpvm::workloads::cg_band || setup.cg_iterations == 0)
    usage("cg: --cg-rows must be a multiple of 8 x --cg-rows-per-warp (>= 4), --cg-iterations >= 1");
  if (setup.halo_side < 8 || setup.halo_side % 8 != 0 || setup.halo_iterations == 0)
    usage("halo: --halo-side must be a multiple of 8 (one warp per plane, whole blocks), --halo-iterations >= 1");
  if (!warpvm::workloads::stencil_side_runs(setup.stencil_side) || setup.stencil_iterations == 0)
    usage(std::string("stencil2gpu: ") + warpvm::workloads::stencil_side_rule + ", --stencil-iterations >= 1");
  if (setup.kmeans_k < 8 || setup.kmeans_k % 8 != 0 || setup.kmeans_k > 1024 || setup.kmeans_points % 2 != 0 ||
      setup.kmeans_points < 2 * setup.kmeans_k || setup.kmeans_points > (1u << 26) || setup.kmeans_iterations == 0 ||
      setup.kmeans_iterations > 1000)
    usage("kmeans2gpu: --kmeans-k must be a multiple of 8 up to 1024 (eight warps of whole centroids), "
          "--kmeans-points even, at least 2 x k and at most 2^26, --kmeans-iterations 1 to 1000 (stamps per warp)");
  if (setup.gemm_side < 128 || setup.gemm_side % 128 != 0 || setup.gemm_side > 8192)
    usage("gemm2gpu: --gemm-side must be a multiple of 128 (two halves of 64-row panels) up to 8192");
  if (setup.bfs_scale < 11 || setup.bfs_scale > 30 || setup.bfs_edge_factor == 0 || setup.bfs_max_levels == 0 ||
      setup.bfs_max_levels > 4096)
    usage("bfs2gpu: --bfs-scale must be 11 to 30 (halves of whole 1024-vertex groups), --bfs-edge-factor >= 1, "
          "--bfs-max-levels 1 to 4096");
  if (setup.bitonic_keys == 0 || setup.bitonic_keys % (2 * warpvm::workloads::bitonic_chunk) != 0 ||
      setup.bitonic_keys > (1u << 30))
    usage("bitonic2gpu: --bitonic-keys must be a positive multiple of 2^17 (two halves of 64K-key chunks) up to 2^30");
  if (setup.pingpong_iterations == 0 || setup.pingpong_iterations > 65536)
    usage("pingpong2gpu: --pingpong-iterations must be 1 to 65536");
  for (const std::uint32_t t : thread_sweep)
    if (t < 32) usage("--consumer-threads-sweep: at least 32 threads (one warp)");
  // Each workload runs the listed modes it has: CPU to GPU cpu_to_gpu_modes, GPU to GPU gpu_pair_modes.
  std::vector<warpvm::workloads::WaitMode> modes, gpu_to_gpu_modes;
  for (const std::string& m : options.modes) {
    auto named = [&](warpvm::workloads::WaitMode x) { return m == mode_name(x); };
    const auto& cpu_modes = warpvm::workloads::cpu_to_gpu_modes;
    const auto& gpu_modes = warpvm::workloads::gpu_pair_modes;
    const auto* cpu_mode = std::find_if(std::begin(cpu_modes), std::end(cpu_modes), named);
    const auto* gpu_mode = std::find_if(std::begin(gpu_modes), std::end(gpu_modes), named);
    if (cpu_mode == std::end(cpu_modes) && gpu_mode == std::end(gpu_modes)) usage("unknown mode " + m);
    if (cpu_mode != std::end(cpu_modes)) modes.push_back(*cpu_mode);
    if (gpu_mode != std::end(gpu_modes)) gpu_to_gpu_modes.push_back(*gpu_mode);
  }
  for (const std::string& w : workloads) {
    const bool gpu_to_gpu = w == "stencil2gpu" || w == "kmeans2gpu" || w == "gemm2gpu" || w == "bfs2gpu" ||
                            w == "bitonic2gpu" || w == "pingpong2gpu";
    if (w != "tiles" && w != "cg" && w != "halo" && !gpu_to_gpu) usage("unknown workload " + w);
    if ((gpu_to_gpu ? gpu_to_gpu_modes : modes).empty())
      usage("none of --modes applies to " + w);
  }
  if (warpvm::device_count() == 0) {
    std::fprintf(stderr, "warpvm-channel-bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  try {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
    Recorder recorder(options);
    bool all_verified = true;
    auto run = [&](CpuToGpuWorkload& w) {
      for (const Record& r : measure(w, setup, sms, modes, options.repeats, all_verified)) recorder.write(r);
    };
    for (const std::string& name : workloads) {
      if (name == "tiles") {
        if (thread_sweep.empty()) thread_sweep.push_back(setup.consumer_threads);
        for (const std::uint32_t threads : thread_sweep) {
          Setup point = setup;
          point.consumer_threads = threads;
          warpvm::workloads::Tiles tiles(point, sms, parallel_for);
          run(tiles);
        }
      } else if (name == "cg") {
        warpvm::workloads::Cg cg(setup);
        run(cg);
      } else if (name == "stencil2gpu" || name == "kmeans2gpu" || name == "gemm2gpu" || name == "bfs2gpu" ||
                 name == "bitonic2gpu" || name == "pingpong2gpu") {
        const auto make = [&](const std::vector<warpvm::workloads::WaitMode>& runnable) -> std::unique_ptr<PairWorkload> {
          namespace wl = warpvm::workloads;
          if (name == "stencil2gpu") return std::make_unique<wl::Stencil2GpuRunner>(setup, runnable, parallel_for);
          if (name == "gemm2gpu") return std::make_unique<wl::Gemm2GpuRunner>(setup, runnable, parallel_for);
          if (name == "bfs2gpu") return std::make_unique<wl::Bfs2GpuRunner>(setup, runnable, parallel_for);
          if (name == "bitonic2gpu") return std::make_unique<wl::Bitonic2GpuRunner>(setup, runnable, parallel_for);
          if (name == "pingpong2gpu") return std::make_unique<wl::Pingpong2GpuRunner>(setup, runnable);
          return std::make_unique<wl::Kmeans2GpuRunner>(setup, runnable, parallel_for);
        };
        for (const Record& r : measure_gpu_pair(name.c_str(), setup, gpu_to_gpu_modes, options.repeats, all_verified, make))
          recorder.write(r);
      } else {
        warpvm::workloads::Halo halo(setup, parallel_for);
        run(halo);
      }
    }
    return all_verified ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-channel-bench: %s\n", e.what());
    return 1;
  }
}
