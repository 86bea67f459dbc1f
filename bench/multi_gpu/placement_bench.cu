// warpvm-placement-bench: issue #6's workloads on N GPUs of one MultiGpuSpace under each page
// policy (on_touch, access_counter, duplication, oasis) and the ideal bound (every GPU works on
// its own device copy of every object: all accesses local, no coherence, not a correct program
// where GPUs read each other's writes, so its records are never "verified"). Data starts on the
// host (drop_cached() before every run); every warpvm result is checked against the same kernel
// run on one GPU over plain device memory. JSON Lines out (docs/benchmarks.md), progress on stderr.
//
//   warpvm-placement-bench --gpus 2 --bytes 1GiB --repeats 3 [--workloads transpose,stencil2d,gemm,pagerank]
//                          [--modes on_touch,access_counter,duplication,oasis,ideal] [--out f.jsonl]

#include "../micro/bench_support.cuh"
#include "cli_args.hpp"
#include "warpvm/sim/rmat.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

/// Plain device memory with the shared_array interface: the ideal mode and the reference.
template <class T>
struct Raw {
  using value_type = T;
  T* data;
  std::uint64_t n;
  unsigned g, G;
  __device__ T load(std::uint64_t i) const { return data[i]; }
  __device__ void store(std::uint64_t i, const T& v) const { data[i] = v; }
  __device__ unsigned gpu() const { return g; }
  __device__ unsigned gpus() const { return G; }
  __host__ __device__ std::uint64_t size() const { return n; }
};

__device__ std::uint64_t tid() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }
__device__ std::uint64_t nthreads() { return std::uint64_t{gridDim.x} * blockDim.x; }

// ---- transpose: 32 x 32 tiles through shared memory, tile rows dealt to the GPUs round-robin ----
// A pure move: the tile holds the arrays' own element type, so no element is converted on the way.
template <class Array>
__global__ void transpose_kernel(Array in, Array out, std::uint64_t n) {
  __shared__ typename Array::value_type tile[32][33];
  const std::uint64_t tiles = n / 32;
  for (std::uint64_t t = blockIdx.x; t < tiles * tiles; t += gridDim.x) {
    const std::uint64_t ti = t / tiles, tj = t % tiles;
    if (ti % out.gpus() != out.gpu()) continue;
    for (unsigned y = threadIdx.y; y < 32; y += blockDim.y) tile[y][threadIdx.x] = in.load((tj * 32 + y) * n + ti * 32 + threadIdx.x);
    __syncthreads();
    for (unsigned y = threadIdx.y; y < 32; y += blockDim.y) out.store((ti * 32 + y) * n + tj * 32 + threadIdx.x, tile[threadIdx.x][y]);
    __syncthreads();
  }
}

// ---- 2D stencil: sweeps inside one kernel, grids swapped, a barrier across every GPU's blocks ----
__device__ void grid_barrier(unsigned* counter, unsigned total_blocks, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_system> c(*counter);
    c.fetch_add(1, cuda::std::memory_order_acq_rel);
    while (c.load(cuda::std::memory_order_acquire) < total_blocks * (round + 1)) __nanosleep(256);
  }
  __syncthreads();
}

template <class Grid>
__global__ void stencil_kernel(Grid a, Grid b, std::uint64_t n, unsigned sweeps, unsigned* barrier, unsigned total_blocks) {
  const std::uint64_t r0 = n * a.gpu() / a.gpus(), r1 = n * (a.gpu() + 1) / a.gpus();
  for (unsigned s = 0; s < sweeps; ++s) {
    const Grid& cur = s % 2 == 0 ? a : b;
    const Grid& next = s % 2 == 0 ? b : a;
    for (std::uint64_t i = r0 * n + tid(); i < r1 * n; i += nthreads()) {
      const std::uint64_t r = i / n, c = i % n;
      std::uint32_t v = cur.load(i);
      if (r > 0 && r + 1 < n && c > 0 && c + 1 < n)
        v = v * 3 + cur.load(i - n) + cur.load(i + n) + cur.load(i - 1) + cur.load(i + 1);
      next.store(i, v);
    }
    grid_barrier(barrier, total_blocks, s);
  }
}

// ---- GEMM: C = A x B, fp32, 64 x 64 tiles of C dealt to the GPUs round-robin, 4 x 4 per thread ----
template <class M>
__global__ void gemm_kernel(M A, M B, M C, std::uint64_t n) {
  __shared__ float as[64][65], bs[64][65];
  const std::uint64_t tiles = n / 64;
  const unsigned tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (std::uint64_t t = blockIdx.x; t < tiles * tiles; t += gridDim.x) {
    if (t % C.gpus() != C.gpu()) continue;
    const std::uint64_t ti = t / tiles, tj = t % tiles;
    float acc[4][4] = {};
    for (std::uint64_t k = 0; k < tiles; ++k) {
      for (unsigned e = threadIdx.x; e < 64 * 64; e += blockDim.x) {
        const unsigned r = e / 64, c = e % 64;
        as[r][c] = A.load((ti * 64 + r) * n + k * 64 + c);
        bs[r][c] = B.load((k * 64 + r) * n + tj * 64 + c);
      }
      __syncthreads();
      for (unsigned kk = 0; kk < 64; ++kk)
        for (unsigned i = 0; i < 4; ++i)
          for (unsigned j = 0; j < 4; ++j) acc[i][j] += as[ty * 4 + i][kk] * bs[kk][tx * 4 + j];
      __syncthreads();
    }
    for (unsigned i = 0; i < 4; ++i)
      for (unsigned j = 0; j < 4; ++j) C.store((ti * 64 + ty * 4 + i) * n + tj * 64 + tx * 4 + j, acc[i][j]);
  }
}

// ---- PageRank (pull) over an R-MAT CSR: x[u] = rank[u] / degree(u); one launch per iteration ----
template <class O, class Cl, class X>
__global__ void pagerank_kernel(O offsets, Cl columns, X x_cur, X x_next, std::uint64_t vertices) {
  const std::uint64_t v0 = vertices * x_next.gpu() / x_next.gpus(), v1 = vertices * (x_next.gpu() + 1) / x_next.gpus();
  for (std::uint64_t v = v0 + tid(); v < v1; v += nthreads()) {
    const std::uint64_t begin = offsets.load(v), end = offsets.load(v + 1);
    float sum = 0;
    for (std::uint64_t e = begin; e < end; ++e) sum += x_cur.load(columns.load(e));
    const float rank = 0.15f / static_cast<float>(vertices) + 0.85f * sum;
    x_next.store(v, end > begin ? rank / static_cast<float>(end - begin) : rank);
  }
}

constexpr unsigned sweeps = 4;      ///< stencil2d sweeps inside its one kernel
constexpr unsigned iterations = 3;  ///< pagerank launches

struct Args {
  std::vector<unsigned> gpus{2};
  std::uint64_t bytes = 1ull << 30;
  int repeats = 3;
  std::vector<std::string> workloads{"transpose", "stencil2d", "gemm", "pagerank"};
  std::vector<std::string> modes{"on_touch", "access_counter", "duplication", "oasis", "ideal"};
  Options out;
};

[[noreturn]] void usage(const std::string& m) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-placement-bench [--gpus 2] [--bytes 1GiB] [--repeats 3] "
               "[--workloads transpose,stencil2d,gemm,pagerank] [--modes on_touch,access_counter,duplication,oasis,ideal] "
               "[--out f.jsonl] [--commit SHA]\n",
               m.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  a.out.suite = "placement";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("warpvm-placement-bench: OASIS placement on N GPUs");
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string v = argv[++i];
    try {
      if (flag == "--gpus") {
        a.gpus.clear();
        for (const auto& g : tools::split_list(v)) a.gpus.push_back(static_cast<unsigned>(std::stoul(g)));
      } else if (flag == "--bytes") a.bytes = tools::parse_bytes(v);
      else if (flag == "--repeats") a.repeats = std::stoi(v);
      else if (flag == "--workloads") a.workloads = tools::split_list(v);
      else if (flag == "--modes") a.modes = tools::split_list(v);
      else if (flag == "--out") a.out.out = v;
      else if (flag == "--commit") a.out.commit = v;
      else usage("unknown option " + flag);
    } catch (const std::logic_error&) {
      usage("bad value for " + flag + ": " + v);
    }
  }
  if (a.repeats < 1) usage("--repeats must be at least 1");
  return a;
}

PlacementPolicy policy_of(const std::string& mode) {
  for (PlacementPolicy p : {PlacementPolicy::on_touch, PlacementPolicy::access_counter, PlacementPolicy::duplication,
                            PlacementPolicy::oasis})
    if (mode == to_string(p)) return p;
  usage("unknown mode " + mode);
}

/// A workload's objects, as host data (the inputs), and how to run it three ways.
struct Workload {
  std::string name;
  std::vector<std::vector<std::uint32_t>> objects;  ///< initial contents, as 32-bit words
  std::size_t output;                               ///< the object that holds the result
  std::uint64_t useful_bytes;
  /// Runs the kernel(s) on `gpus` GPUs with the objects given as Raw pointers per GPU.
  std::function<void(const std::vector<std::vector<std::uint32_t*>>&, const std::vector<cudaStream_t>&, unsigned gpus)> raw;
  /// Runs through a space; `objs` are its objects in order.
  std::function<void(MultiGpuSpace&, const std::vector<shared_object<std::uint32_t>>&)> paged;
};

template <class T>
Raw<T> raw_of(std::uint32_t* p, std::uint64_t words, unsigned g, unsigned G) {
  return Raw<T>{reinterpret_cast<T*>(p), words * 4 / sizeof(T), g, G};
}
template <class T>
shared_array<T> as(const shared_array<std::uint32_t>& a) {
  return a.template as<T>();
}

unsigned occupancy_blocks(const void* kernel, int block, int device) {
  int per_sm = 0, sms = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0), "occupancy");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  return static_cast<unsigned>(std::max(1, per_sm) * sms);
}

Workload make_workload(const std::string& name, std::uint64_t bytes, unsigned* barrier) {
  Workload w;
  w.name = name;
  if (name == "transpose") {
    const std::uint64_t n = std::max<std::uint64_t>(32, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)) / 32 * 32);
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 11);
    w.output = 1;
    w.useful_bytes = 2 * n * n * 4;
    w.raw = [n](const auto& p, const auto& streams, unsigned G) {
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        transpose_kernel<<<1056, dim3(32, 8), 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G),
                                                              raw_of<std::uint32_t>(p[g][1], n * n, g, G), n);
      }
    };
    w.paged = [n](MultiGpuSpace& s, const auto& o) {
      s.launch(transpose_kernel<shared_array<std::uint32_t>>, dim3(1056), dim3(32, 8), 0, o[0].on(0), o[1].on(0), n);
    };
  } else if (name == "stencil2d") {
    const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)));
    w.objects.assign(2, std::vector<std::uint32_t>(n * n));
    fill_random(w.objects[0].data(), n * n, 12);
    w.output = sweeps % 2;
    w.useful_bytes = sweeps * 2 * n * n * 4;
    w.raw = [n, barrier](const auto& p, const auto& streams, unsigned G) {
      const auto kernel = stencil_kernel<Raw<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), 256, 0);
      check(cudaMemset(barrier, 0, sizeof(unsigned)), "barrier reset");
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        kernel<<<blocks, 256, 0, streams[g]>>>(raw_of<std::uint32_t>(p[g][0], n * n, g, G), raw_of<std::uint32_t>(p[g][1], n * n, g, G),
                                               n, sweeps, barrier, blocks * G);
      }
    };
    w.paged = [n, barrier](MultiGpuSpace& s, const auto& o) {
      const auto kernel = stencil_kernel<shared_array<std::uint32_t>>;
      const unsigned blocks = occupancy_blocks(reinterpret_cast<const void*>(kernel), 256, s.device(0));
      check(cudaMemset(barrier, 0, sizeof(unsigned)), "barrier reset");
      s.launch(kernel, dim3(blocks), dim3(256), 0, o[0].on(0), o[1].on(0), n, sweeps, barrier, blocks * s.gpus());
    };
  } else if (name == "gemm") {
    const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 12.0)) / 64 * 64);
    w.objects.assign(3, std::vector<std::uint32_t>(n * n));
    for (int m = 0; m < 2; ++m) {
      auto* f = reinterpret_cast<float*>(w.objects[m].data());
      parallel_for(n * n, [&](std::uint64_t lo, std::uint64_t hi) {
        for (std::uint64_t i = lo; i < hi; ++i) f[i] = static_cast<float>(sim::mix64(i * 3 + m) % 1024) / 512.0f - 1.0f;
      });
    }
    w.output = 2;
    w.useful_bytes = 3 * n * n * 4;
    w.raw = [n](const auto& p, const auto& streams, unsigned G) {
      for (unsigned g = 0; g < G; ++g) {
        check(cudaSetDevice(g), "cudaSetDevice");
        gemm_kernel<<<264, 256, 0, streams[g]>>>(raw_of<float>(p[g][0], n * n, g, G), raw_of<float>(p[g][1], n * n, g, G),
                                                 raw_of<float>(p[g][2], n * n, g, G), n);
      }
    };
    w.paged = [n](MultiGpuSpace& s, const auto& o) {
      s.launch(gemm_kernel<shared_array<float>>, dim3(264), dim3(256), 0, as<float>(o[0].on(0)), as<float>(o[1].on(0)),
               as<float>(o[2].on(0)), n);
    };
  } else if (name == "pagerank") {
    sim::RmatParams graph{.scale = 4};
    const auto footprint = [](const sim::RmatParams& p) { return p.csr_bytes() + 2 * p.vertices() * 4; };
    while (graph.scale < 28 && footprint(graph) < bytes) ++graph.scale;
    const std::uint64_t v = graph.vertices();
    std::vector<std::uint64_t> offsets(v + 1);
    w.objects.resize(4);
    w.objects[1].resize(graph.directed_edges());
    sim::build_rmat_csr(graph, offsets, w.objects[1], parallel_for);
    w.objects[0].resize(2 * (v + 1));
    std::memcpy(w.objects[0].data(), offsets.data(), (v + 1) * 8);
    w.objects[2].assign(v, 0);
    auto* x = reinterpret_cast<float*>(w.objects[2].data());
    for (std::uint64_t i = 0; i < v; ++i) x[i] = offsets[i + 1] > offsets[i] ? 1.0f / v / (offsets[i + 1] - offsets[i]) : 1.0f / v;
    w.objects[3].assign(v, 0);
    w.output = 2 + iterations % 2;
    w.useful_bytes = iterations * (footprint(graph) + graph.directed_edges() * 4);
    w.raw = [v](const auto& p, const auto& streams, unsigned G) {
      for (unsigned it = 0; it < iterations; ++it) {
        for (unsigned g = 0; g < G; ++g) {
          check(cudaSetDevice(g), "cudaSetDevice");
          pagerank_kernel<<<1056, 256, 0, streams[g]>>>(raw_of<std::uint64_t>(p[g][0], 2 * (v + 1), g, G),
                                                        raw_of<std::uint32_t>(p[g][1], 0, g, G),
                                                        raw_of<float>(p[g][2 + it % 2], v, g, G),
                                                        raw_of<float>(p[g][2 + (it + 1) % 2], v, g, G), v);
        }
        for (unsigned g = 0; g < G; ++g) check(cudaStreamSynchronize(streams[g]), "pagerank iteration");
      }
    };
    w.paged = [v](MultiGpuSpace& s, const auto& o) {
      for (unsigned it = 0; it < iterations; ++it)
        s.launch(pagerank_kernel<shared_array<std::uint64_t>, shared_array<std::uint32_t>, shared_array<float>>, dim3(1056),
                 dim3(256), 0, as<std::uint64_t>(o[0].on(0)), o[1].on(0), as<float>(o[2 + it % 2].on(0)),
                 as<float>(o[2 + (it + 1) % 2].on(0)), v);
    };
  } else {
    usage("unknown workload " + name);
  }
  return w;
}

/// Makes GPU 0's stream wait for every other GPU's, so that events on it time the whole phase.
void join_streams(const std::vector<cudaStream_t>& streams, const std::vector<cudaEvent_t>& events) {
  for (std::size_t g = 1; g < streams.size(); ++g) {
    check(cudaSetDevice(static_cast<int>(g)), "cudaSetDevice");
    check(cudaEventRecord(events[g], streams[g]), "cudaEventRecord");
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamWaitEvent(streams[0], events[g], 0), "cudaStreamWaitEvent");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
}

void add_stats(Record& r, const GpuPlacementStats& s, double runs) {
  const auto put = [&](const char* k, std::uint64_t v) { r.extra[k] = static_cast<double>(v) / runs; };
  put("local_accesses", s.local_accesses);
  put("remote_accesses", s.remote_accesses);
  put("first_touches", s.first_touches);
  put("shared_faults", s.shared_faults);
  put("migrations", s.migrations);
  put("counter_migrations", s.counter_migrations);
  put("replications", s.replications);
  put("collapses", s.collapses);
  put("remote_maps", s.remote_maps);
  put("invalidations", s.invalidations);
  put("aborted_transitions", s.aborted_transitions);
  put("nvlink_bytes", s.nvlink_bytes);
  put("pcie_bytes", s.pcie_bytes);
  r.faults = static_cast<std::int64_t>((s.first_touches + s.shared_faults) / runs);
  r.bytes_moved = static_cast<std::int64_t>((s.nvlink_bytes + s.pcie_bytes) / runs);
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Recorder recorder(a.out);
  int visible = 0;
  check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  for (const unsigned G : a.gpus) {
    if (G < 1 || static_cast<int>(G) > visible) usage("--gpus " + std::to_string(G) + ": only " + std::to_string(visible) + " visible");
    std::vector<cudaStream_t> streams(G);
    std::vector<cudaEvent_t> events(G);
    for (unsigned g = 0; g < G; ++g) {
      check(cudaSetDevice(g), "cudaSetDevice");
      for (unsigned h = 0; h < G; ++h) {
        if (h == g) continue;
        const cudaError_t e = cudaDeviceEnablePeerAccess(h, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError(); else check(e, "cudaDeviceEnablePeerAccess");
      }
      check(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&events[g], cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaSetDevice(0), "cudaSetDevice");
    DeviceBuffer<unsigned> barrier(1);
    for (const std::string& name : a.workloads) {
      std::fprintf(stderr, "[%u GPUs] %s: generating %.2f GiB of input\n", G, name.c_str(), a.bytes / double(1ull << 30));
      const Workload w = make_workload(name, a.bytes, barrier.data);
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
        w.raw(ptrs, {streams[0]}, 1);
        check(cudaSetDevice(0), "cudaSetDevice");
        check(cudaStreamSynchronize(streams[0]), "reference run");
        check(cudaMemcpy(reference.data(), ptrs[0][w.output], reference.size() * 4, cudaMemcpyDeviceToHost), "download");
      }
      for (const std::string& mode : a.modes) {
        std::fprintf(stderr, "[%u GPUs] %s: %s\n", G, name.c_str(), mode.c_str());
        Record r;
        r.workload = name;
        r.mode = mode;
        r.policy = mode;
        r.cache_fraction = 1.0;
        r.dataset_bytes = footprint;
        r.useful_bytes = w.useful_bytes;
        r.extra["gpus"] = G;
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
          r.seconds = time_runs(streams[0], a.repeats, upload, [&] {
            w.raw(ptrs, streams, G);
            join_streams(streams, events);
          });
          r.verified = false;  // a bound, not a coherent program (see the file comment)
          r.extra["ideal_bound"] = 1;
        } else {
          MultiGpuConfig config;
          for (unsigned g = 0; g < G; ++g) config.devices.push_back(static_cast<int>(g));
          config.frame_bytes_per_gpu = footprint + footprint / 8 + (64ull << 20);
          config.default_policy = policy_of(mode);
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
            space.reset_stats();
          };
          GpuPlacementStats sum;
          r.seconds = time_runs(space_streams[0], a.repeats, reset, [&] {
            w.paged(space, objs);
            join_streams(space_streams, events);
          });
          // time_runs' last run is the one whose counters are left: one run's worth.
          sum = space.stats().total();
          space.flush();
          r.verified = std::memcmp(objs[w.output].host().data(), reference.data(), reference.size() * 4) == 0;
          add_stats(r, sum, 1.0);
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
  return 0;
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
