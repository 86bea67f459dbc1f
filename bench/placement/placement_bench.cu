// warpvm-placement-bench: issue #6's workloads on N GPUs of one MultiGpuSpace under each page
// policy (on_touch, access_counter, duplication, oasis) and the ideal bound (every GPU works on
// its own device copy of every object: all accesses local, no coherence, not a correct program
// where GPUs read each other's writes, so its records are never "verified"; bfs's ideal keeps
// one depth array, on the first GPU, that the others update with peer atomics: on separate
// copies no GPU would see the vertices the others claim, and the frontier needs them). Data starts on the
// host (drop_cached() before every run; --initial-placement places it on the GPUs, untimed); every warpvm result is checked against the same kernel
// run on one GPU over plain device memory (exit status 1 if any differs; the reference itself is
// checked against a host computation for stencil2d, bfs, im2col and fft, and at samples for conv2d and gemm).
// The real-UVM modes (uvm, uvm_read_mostly, uvm_accessed_by; in core only) run the reference's
// kernels on every GPU over one cudaMallocManaged copy of each object, written on the host before
// every run: coherent programs, checked like the paged modes. --cache-fraction F < 1 runs the
// paged modes oversubscribed (issue #6's cache = 2/3 of the footprint): each GPU's frame pool is
// F x the footprint, pages are evicted (dirty ones written back) and every result is still
// checked against the reference; ideal and the uvm modes ignore it (uvm stays in core). JSON
// Lines out (docs/bench/placement.md; records carry cache_fraction, evictions and writebacks),
// progress on stderr.
//
// transpose_flat is transpose with the paged modes' element accesses by flat address (flat_view,
// the shadow map of OASIS-InMem), to price the lookup against the handles.
//
// The workloads (kernels, inputs, host checks) are warpvm::workloads::multi_gpu's
// (placement_workloads.cuh); this program runs them in each mode, times and checks them.
//
//   warpvm-placement-bench --gpus 2 --bytes 1GiB --repeats 3 [--workloads transpose,stencil2d,gemm,pagerank,im2col,conv2d,bfs,fft,transpose_flat]
//                          [--modes on_touch,access_counter,duplication,oasis,ideal,uvm,uvm_read_mostly,uvm_accessed_by]
//                          [--cache-fraction 0.667] [--initial-placement blocks] [--out f.jsonl]

#include "harness.cuh"
#include "cli.hpp"
#include "placement_modes.cuh"
#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/workloads/multi_gpu/placement_workloads.cuh"

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

using workloads::multi_gpu::Copies;
using workloads::multi_gpu::Workload;

struct Args {
  std::vector<unsigned> gpus{2};
  std::uint64_t bytes = 1ull << 30;
  std::vector<std::string> workloads{"transpose", "stencil2d", "gemm", "pagerank", "im2col", "conv2d"};
  std::vector<std::uint32_t> reset_thresholds{detail::default_reset_threshold};  ///< oasis: one run each
  std::uint32_t counter_threshold = detail::default_counter_threshold;
  std::uint64_t page_bytes = MultiGpuConfig{}.page_bytes;  ///< the paged modes' page size
  double cache_fraction = 1.0;  ///< the paged modes' pool per GPU, as a fraction of the footprint
  std::optional<Spread> initial_spread;  ///< --initial-placement: nullopt for the host (the default)
  bool barrier_times = false;  ///< --barrier-times 1: one more paged run of stencil2d and fft, its rounds timed
  Options out;  ///< the shared options (add_shared_options)
};

/// A request that cannot run (an unknown mode or workload, more GPUs than visible): the message
/// on stderr, exit code 2, as for a bad option.
[[noreturn]] void usage(const std::string& m) {
  std::fprintf(stderr, "warpvm-placement-bench: %s\nRun with --help for more information.\n", m.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  a.out.suite = "placement";
  a.out.modes = {"on_touch", "access_counter", "duplication", "oasis", "ideal"};
  CLI::App app{"warpvm-placement-bench: OASIS placement on N GPUs, JSON Lines out.\n"
               "modes: on_touch, access_counter, duplication, oasis, ideal; also uvm, uvm_read_mostly, uvm_accessed_by\n"
               "(not run by default): real UVM, the raw kernels on every GPU over one cudaMallocManaged copy per object,\n"
               "in core only (a mode is skipped, with a message, when the footprint does not fit what every GPU has free).",
               "warpvm-placement-bench"};
  add_shared_options(app, a.out);
  cli::add_list(app, "--gpus", a.gpus, "GPU counts to run")->check(CLI::PositiveNumber);
  cli::add_bytes(app, "--bytes", a.bytes, "footprint of each workload");
  cli::add_list(app, "--workloads", a.workloads,
                "transpose, stencil2d, gemm, pagerank, im2col, conv2d (the default), bfs, fft (a 1D complex FFT of the "
                "largest 2^k points that fit --bytes), transpose_flat (paged modes access every element by flat address)");
  cli::add_list(app, "--reset-thresholds", a.reset_thresholds,
                "oasis runs once per O-Table reset threshold (the paper's sensitivity study)")
      ->check(CLI::Range(1u, unsigned(detail::otable::max_reset_threshold)));
  app.add_option("--counter-threshold", a.counter_threshold, "access_counter: remote accesses before a page migrates")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--page-bytes",
         [&a](const std::string& text) {
           std::uint64_t bytes = 0;
           try {
             bytes = cli::parse_bytes(text);
           } catch (const std::logic_error&) {
           }
           if (bytes < 4096 || !std::has_single_bit(bytes))
             throw CLI::ValidationError("--page-bytes", "must be a power of two, at least 4 KiB");
           a.page_bytes = bytes;
         },
         "the paged modes' page size (records of another size than 4 KiB name their policy <mode>_page<bytes>)");
  app.add_option("--cache-fraction", a.cache_fraction,
                 "each GPU's frame pool in the paged modes as a fraction of the footprint; below 1 pages are evicted "
                 "(ideal and the uvm modes run in core)")
      ->check(cli::unit_fraction);
  cli::add_initial_placement(app, a.initial_spread);
  app.add_option_function<unsigned>(
      "--barrier-times", [&a](unsigned on) { a.barrier_times = on != 0; },
      "1: after the timed runs of a paged mode of stencil2d or fft, one more run whose barrier rounds the host times");
  cli::parse(app, argc, argv);
  return a;
}

PlacementPolicy policy_of(const std::string& mode) {
  for (PlacementPolicy p : {PlacementPolicy::on_touch, PlacementPolicy::access_counter, PlacementPolicy::duplication,
                            PlacementPolicy::oasis})
    if (mode == to_string(p)) return p;
  usage("unknown mode " + mode);
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Recorder recorder(a.out);
  int mismatches = 0;
  int visible = 0;
  check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  for (const unsigned G : a.gpus) {
    if (G < 1 || static_cast<int>(G) > visible) usage("--gpus " + std::to_string(G) + ": only " + std::to_string(visible) + " visible");
    std::vector<cudaStream_t> streams(G);
    std::vector<cudaEvent_t> events(G);
    for (unsigned g = 0; g < G; ++g) {
      check(cudaSetDevice(g), "cudaSetDevice");
      for (unsigned h = 0; h < G; ++h)
        if (h != g) detail::enable_peer_access(static_cast<int>(g), static_cast<int>(h), "warpvm-placement-bench");
      check(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&events[g], cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaSetDevice(0), "cudaSetDevice");
    DeviceBuffer<unsigned> device_word(1);
    for (const std::string& name : a.workloads) {
      std::fprintf(stderr, "[%u GPUs] %s: generating %.2f GiB of input\n", G, name.c_str(), a.bytes / double(1ull << 30));
      const std::optional<Workload> made = workloads::multi_gpu::make_workload(name, a.bytes, device_word.data, parallel_for);
      if (!made) usage("unknown workload " + name);
      const Workload& w = *made;
      std::uint64_t footprint = 0;
      for (const auto& o : w.objects) footprint += o.size() * 4;
      // The reference: the same kernels on GPU 0 over plain device memory.
      std::fprintf(stderr, "[%u GPUs] %s: single-GPU reference\n", G, name.c_str());
      std::vector<std::uint32_t> reference(w.objects[w.output].size());
      {
        std::vector<std::unique_ptr<DeviceBuffer<std::uint32_t>>> bufs;
        std::vector<std::vector<std::uint32_t*>> ptrs(1);
        for (const auto& o : w.objects) {
          bufs.push_back(std::make_unique<DeviceBuffer<std::uint32_t>>(o.size()));
          check(cudaMemcpy(bufs.back()->data, o.data(), o.size() * 4, cudaMemcpyHostToDevice), "upload");
          ptrs[0].push_back(bufs.back()->data);
        }
        w.raw(ptrs, {streams[0]}, 1, Copies::per_gpu);
        check(cudaSetDevice(0), "cudaSetDevice");
        check(cudaStreamSynchronize(streams[0]), "reference run");
        check(cudaMemcpy(reference.data(), ptrs[0][w.output], reference.size() * 4, cudaMemcpyDeviceToHost), "download");
      }
      if (w.check_reference) {
        const std::string wrong = w.check_reference(w.objects, reference);
        if (!wrong.empty()) throw std::runtime_error("the single-GPU reference is wrong: " + wrong);
      }
      // A coherent mode's result (on the host) against the reference; a mismatch is said and counted.
      const auto verify = [&](Record& r, const std::uint32_t* output) {
        r.verified = std::memcmp(output, reference.data(), reference.size() * 4) == 0;
        if (r.verified) return;
        std::fprintf(stderr, "[%u GPUs] %s: %s: MISMATCH against the single-GPU reference\n", G, name.c_str(), r.mode.c_str());
        mismatches += 1;
      };
      for (const std::string& mode : a.out.modes)
      for (const std::uint32_t reset_threshold :
           mode == "oasis" ? a.reset_thresholds : std::vector<std::uint32_t>{detail::default_reset_threshold}) {
        std::fprintf(stderr, "[%u GPUs] %s: %s (reset threshold %u)\n", G, name.c_str(), mode.c_str(), reset_threshold);
        Record r;
        r.workload = name;
        r.mode = mode;
        // The sensitivity runs are points of their own (reports key points by policy).
        r.policy = reset_threshold == detail::default_reset_threshold ? mode : mode + "_reset" + std::to_string(reset_threshold);
        r.cache_fraction = 1.0;
        r.dataset_bytes = footprint;
        r.useful_bytes = w.useful_bytes;
        r.extra["gpus"] = G;
        // --bytes, the scaling point (each shape lands near it), in MiB: extras print 9 digits.
        r.extra["requested_mib"] = static_cast<double>(a.bytes) / (1 << 20);
        if (mode == "ideal") {
          std::vector<std::vector<std::unique_ptr<DeviceBuffer<std::uint32_t>>>> bufs(G);
          std::vector<std::vector<std::uint32_t*>> ptrs(G);
          const auto upload = [&] {
            for (unsigned g = 0; g < G; ++g)
              for (std::size_t i = 0; i < w.objects.size(); ++i)
                check(cudaMemcpy(ptrs[g][i], w.objects[i].data(), w.objects[i].size() * 4, cudaMemcpyHostToDevice), "upload");
          };
          for (unsigned g = 0; g < G; ++g) {
            check(cudaSetDevice(g), "cudaSetDevice");
            for (const auto& o : w.objects) {
              bufs[g].push_back(std::make_unique<DeviceBuffer<std::uint32_t>>(o.size()));
              ptrs[g].push_back(bufs[g].back()->data);
            }
          }
          check(cudaSetDevice(0), "cudaSetDevice");
          r.seconds = time_runs(streams[0], a.out.repeats, upload, [&] {
            w.raw(ptrs, streams, G, Copies::per_gpu);
            join_streams(streams, events);
          });
          r.bound = true;  // not a coherent program (see the file comment): nothing to verify
          r.extra["ideal_bound"] = 1;
        } else if (const std::optional<UvmAdvice> advice = uvm_advice_of(mode)) {
          if (a.initial_spread) {
            std::fprintf(stderr, "[%u GPUs] %s: %s skipped: --initial-placement applies to the paged modes only\n", G,
                         name.c_str(), mode.c_str());
            continue;
          }
          if (!fits_on_every_gpu(G, mode, footprint)) continue;
          // Each object allocated once; every GPU's pointers are the same managed ones.
          std::vector<std::unique_ptr<Managed>> managed;
          std::vector<std::uint32_t*> one_copy;
          for (const auto& o : w.objects) {
            managed.push_back(std::make_unique<Managed>(o.size() * 4));
            one_copy.push_back(managed.back()->as<std::uint32_t>());
          }
          const std::vector<std::vector<std::uint32_t*>> ptrs(G, one_copy);
          const auto fill = [&] {
            for (std::size_t i = 0; i < w.objects.size(); ++i) managed[i]->assign(w.objects[i].data());
            advise(w, managed, *advice, G);
          };
          const auto run_once = [&] {
            w.raw(ptrs, streams, G, Copies::shared);
            join_streams(streams, events);
          };
          r.seconds = time_runs(streams[0], a.out.repeats, fill, run_once);
          // time_runs waited for the last run (every GPU's stream joins the first's).
          verify(r, managed[w.output]->as<std::uint32_t>());
          add_uvm_traffic(r, fill, run_once, a.out.uvm_counted_runs);
        } else {
          MultiGpuConfig config;
          for (unsigned g = 0; g < G; ++g) config.devices.push_back(static_cast<int>(g));
          config.frame_bytes_per_gpu = pool_bytes_per_gpu(a.cache_fraction, footprint, a.page_bytes, G);
          if (a.cache_fraction < 1) {
            r.cache_fraction = static_cast<double>(config.frame_bytes_per_gpu) / static_cast<double>(footprint);
            if (r.cache_fraction >= 1)
              std::fprintf(stderr, "[%u GPUs] %s: the pool floor (two frames per resident warp) holds the footprint: in core\n", G,
                           name.c_str());
          }
          config.default_policy = policy_of(mode);
          config.reset_threshold = reset_threshold;
          config.counter_threshold = a.counter_threshold;
          config.page_bytes = a.page_bytes;
          r.extra["page_bytes"] = static_cast<double>(a.page_bytes);
          if (a.page_bytes != MultiGpuConfig{}.page_bytes) r.policy += "_page" + std::to_string(a.page_bytes);
          r.policy += cli::initial_placement_suffix(a.initial_spread);
          r.extra["reset_threshold"] = reset_threshold;
          r.extra["counter_threshold"] = a.counter_threshold;
          MultiGpuSpace space(config);
          std::vector<shared_object<std::uint32_t>> objs;
          for (std::size_t i = 0; i < w.objects.size(); ++i)
            objs.push_back(space.alloc<std::uint32_t>(w.objects[i].size(), std::nullopt, name + "." + std::to_string(i)));
          std::vector<cudaStream_t> space_streams(G);
          for (unsigned g = 0; g < G; ++g) space_streams[g] = space.stream(g);
          const auto reset = [&] {
            space.drop_cached();
            for (std::size_t i = 0; i < objs.size(); ++i)
              std::memcpy(objs[i].host().data(), w.objects[i].data(), w.objects[i].size() * 4);
            if (a.initial_spread)
              for (const auto& o : objs) space.place_on_gpus(o, *a.initial_spread);
            space.reset_stats();
          };
          GpuPlacementStats sum;
          r.seconds = time_runs(space_streams[0], a.out.repeats, reset, [&] {
            w.paged(space, objs);
            join_streams(space_streams, events);
          });
          // time_runs' last run is the one whose counters are left: one run's worth.
          sum = space.stats().total();
          space.flush();
          verify(r, objs[w.output].host().data());
          add_stats(r, sum, 1.0);
          if (a.barrier_times && w.barrier_rounds > 0) {
            reset();
            print_barrier_rounds(r.workload + " " + r.policy, device_word.data, w.barrier_rounds, space,
                                 [&] { w.paged(space, objs); });
            space.flush();  // raises the run's device failures; its result is checked as the timed runs' were
            verify(r, objs[w.output].host().data());
          }
        }
        recorder.write(r);
      }
    }
    for (unsigned g = 0; g < G; ++g) {
      check(cudaSetDevice(g), "cudaSetDevice");
      cudaStreamDestroy(streams[g]);
      cudaEventDestroy(events[g]);
    }
    check(cudaSetDevice(0), "cudaSetDevice");
  }
  return mismatches == 0 ? 0 : 1;
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  try {
    return warpvm::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-placement-bench: %s\n", e.what());
    return 1;
  }
}
