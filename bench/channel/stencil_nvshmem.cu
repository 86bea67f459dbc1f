// warpvm-stencil-nvshmem: stencil2gpu (stencil2gpu.cuh, stencil_run) with its cut rows
// exchanged through NVSHMEM, the design of NVIDIA's multi-GPU Jacobi NVSHMEM example: each GPU's
// cut block stores its new cut row locally, then puts it into the other GPU's halo with a signal
// (nvshmemx_putmem_signal_nbi_block), and lane 0 of each of its warps waits on its own signal
// word (nvshmem_signal_wait_until). The same grid, seed, update rule, block layout and host
// reference as warpvm-channel-bench --workloads stencil2gpu, so its records (mode "nvshmem")
// sit beside stencil2gpu's channel, channel_direct, peer_flag (the P2P design), naive and
// atomic_wait in one table (warpvm report).
//
// NVSHMEM runs one PE per process: the binary forks before any CUDA call; the parent is PE 0 on
// GPU 0, the child PE 1 on GPU 1, joined through a unique id sent over a pipe
// (NVSHMEMX_INIT_WITH_UNIQUEID; no MPI). NVSHMEM_DISABLE_NVLS is set to 1 (NVLink multicast
// off) unless the caller set it.

#include <nvshmem.h>
#include <nvshmemx.h>

#include "harness.cuh"
#include "warpvm/workloads/channel/stencil2gpu.cuh"
#include "warpvm/detail/core/cuda_buffers.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <csignal>

#include <sys/wait.h>
#include <unistd.h>

namespace warpvm::bench {
namespace {


/// The exchange of stencil_run through NVSHMEM: the neighbour puts its cut row of state k into
/// halo[k % 2] with signal[k % 2] set to k + 1 (the two-slot argument is stencil_run's).
///
/// A signal per slot, because NVSHMEM orders one put's data before its own signal but not two
/// puts to one PE (without nvshmem_fence): with one signal word, put k + 1's signal could land
/// before put k's data (the wait for k would pass over an old row) or put k's signal after put
/// k + 1's (SET back to k + 1: the wait for k + 1 would never end). Puts into one slot, k and
/// k + 2, are a round apart: the neighbour sends the row that lets this GPU compute row k + 2 only
/// after it consumed row k, so each slot's signal and data see one put at a time.
struct NvshmemExchange {
  std::uint32_t side;
  int peer;
  std::uint32_t* halo;    ///< symmetric, [2][side]: the neighbour's rows arrive here
  std::uint64_t* signal;  ///< symmetric, [2]: signal[s], the state + 1 of the last row put into halo slot s

  /// Rows go whole, in announce().
  __device__ void send(std::uint32_t /*state*/, std::uint32_t /*x*/, std::uint32_t /*v*/) const {}
  /// Block-collective, after the __syncthreads that follows the row's stores: the row into the
  /// neighbour's slot, then its signal (NVSHMEM delivers the data before the signal).
  __device__ void announce(std::uint32_t state, const std::uint32_t* row) const {
    nvshmemx_putmem_signal_nbi_block(halo + std::uint64_t{state % 2} * side, row, std::size_t{side} * 4,
                                     signal + state % 2, state + 1, NVSHMEM_SIGNAL_SET, peer);
  }
  struct Window {
    const std::uint32_t* data;
    template <class T>
    __device__ T load(std::uint32_t i) const {
      return __ldcg(reinterpret_cast<const T*>(data) + i);  // written by the peer during the kernel
    }
    __device__ void release() const {}
  };
  /// Every warp of the cut block: lane 0 waits for the neighbour's row of state `state`.
  __device__ Window meet(std::uint32_t state, std::uint32_t first_column, std::uint32_t /*slice*/) const {
    __syncwarp();
    if (threadIdx.x % 32 == 0) nvshmem_signal_wait_until(signal + state % 2, NVSHMEM_CMP_GE, state + 1);
    __syncwarp();
    return {halo + std::uint64_t{state % 2} * side + first_column};
  }
};

/// Four blocks per SM, as stencil2gpu_kernel gets (40 registers): NVSHMEM's inlined put and wait
/// take it to 106 registers otherwise, two blocks per SM, and half of stencil2gpu's block count.
__global__ void __launch_bounds__(workloads::block_threads, 4) stencil_nvshmem_kernel(workloads::StencilHalf grid, NvshmemExchange x) {
  workloads::stencil_run(grid, x);
}

struct Setup {
  std::uint32_t side = 4096, iterations = 300;
  std::uint64_t seed = 0;
};

/// What PE 1 tells PE 0 after each run.
struct RunReport {
  double seconds;
  bool verified;
};

/// One PE's side of every run: its half of the grid, `repeats` + 1 runs (the first a warm-up),
/// each checked against the host reference. Returns the runs' kernel times and checks.
std::vector<RunReport> run_pe(int pe, const Setup& s, int repeats, std::uint32_t& blocks) {
  const std::uint32_t side = s.side, rows = side / 2;
  const std::uint64_t half = std::uint64_t{rows} * side;
  std::vector<std::uint32_t> initial(std::uint64_t{side} * side);
  fill_random(initial.data(), initial.size(), s.seed + 2);  // stencil2gpu's grid for this seed
  if (pe == 0) std::fprintf(stderr, "stencil-nvshmem: host reference (%u x %u, %u iterations)\n", side, side, s.iterations);
  const std::vector<std::uint32_t> reference = workloads::stencil_reference(initial, side, s.iterations, parallel_for);

  int sms = 0, per_sm = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, pe), "cudaDeviceGetAttribute");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(&stencil_nvshmem_kernel),
                                                      static_cast<int>(workloads::block_threads), 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  // stencil2gpu's block count (GpuPair): all resident at once
  blocks = std::min(workloads::stencil_max_blocks(side), static_cast<std::uint32_t>(per_sm * sms));

  const auto cells = detail::make_device<std::uint32_t>(2 * half, "stencil cells");
  const auto progress = detail::make_device<std::uint32_t>(blocks, "stencil progress");
  auto* halo = static_cast<std::uint32_t*>(nvshmem_malloc(2ull * side * 4));
  auto* signal = static_cast<std::uint64_t*>(nvshmem_malloc(2 * sizeof(std::uint64_t)));
  if (halo == nullptr || signal == nullptr) throw std::runtime_error("nvshmem_malloc failed");
  const auto stream = detail::make_stream();
  cudaEvent_t begin = nullptr, end = nullptr;
  check(cudaEventCreate(&begin), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");

  std::vector<RunReport> reports;
  for (int run = 0; run <= repeats; ++run) {
    check(cudaMemcpy(cells.get(), initial.data() + pe * half, half * 4, cudaMemcpyHostToDevice), "stencil cells");
    check(cudaMemset(progress.get(), 0, std::uint64_t{blocks} * 4), "cudaMemset progress");
    check(cudaMemset(halo, 0xff, 2ull * side * 4), "cudaMemset halo");  // poisoned: a row read early shows
    check(cudaMemset(signal, 0, 2 * sizeof(std::uint64_t)), "cudaMemset signal");
    check(cudaDeviceSynchronize(), "sync");
    nvshmem_barrier_all();  // both PEs reset before either kernel starts
    const workloads::StencilHalf grid{side, s.iterations, pe == 0, cells.get(), progress.get(), workloads::Stamps{}};
    const NvshmemExchange x{side, 1 - pe, halo, signal};
    check(cudaEventRecord(begin, stream.get()), "cudaEventRecord");
    stencil_nvshmem_kernel<<<blocks, workloads::block_threads, 0, stream.get()>>>(grid, x);
    check(cudaGetLastError(), "stencil_nvshmem_kernel launch");
    check(cudaEventRecord(end, stream.get()), "cudaEventRecord");
    check(cudaEventSynchronize(end), "stencil_nvshmem_kernel");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    std::vector<std::uint32_t> got(half);
    check(cudaMemcpy(got.data(), cells.get() + (s.iterations % 2) * half, half * 4, cudaMemcpyDeviceToHost),
          "stencil cells");
    const auto want = reference.begin() + static_cast<std::ptrdiff_t>(pe * half);
    const auto [at, expected] = std::mismatch(got.begin(), got.end(), want);
    if (at != got.end()) {
      const auto i = static_cast<std::uint64_t>(at - got.begin()) + pe * half;
      std::fprintf(stderr, "stencil-nvshmem: PE %d: first difference at row %llu, column %llu: %u, expected %u\n", pe,
                   static_cast<unsigned long long>(i / side), static_cast<unsigned long long>(i % side), *at, *expected);
    }
    reports.push_back({ms / 1e3, at == got.end()});
    nvshmem_barrier_all();  // neither PE resets the halo while the other's puts may still land
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  nvshmem_free(halo);
  nvshmem_free(signal);
  return reports;
}

/// Joins NVSHMEM as PE `pe` of 2; PE 0 makes the unique id and writes it to `id_out`, PE 1 reads it from `id_in`.
void join(int pe, int id_in, int id_out) {
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (pe == 0) {
    if (nvshmemx_get_uniqueid(&id) != 0) throw std::runtime_error("nvshmemx_get_uniqueid failed");
    if (write(id_out, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) throw std::runtime_error("sending the unique id");
  } else if (read(id_in, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
    throw std::runtime_error("receiving the unique id");
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_set_attr_uniqueid_args(pe, 2, &id, &attr);
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) throw std::runtime_error("nvshmemx_init_attr failed");
  if (nvshmem_n_pes() != 2 || nvshmem_my_pe() != pe) throw std::runtime_error("NVSHMEM did not make PEs 0 and 1");
}

/// The pipe ends one process keeps (-1: the other process's).
struct Pipes {
  int id_in, id_out, report_in, report_out;
};

/// A run of a process this long means a peer is stuck (a run takes seconds).
constexpr unsigned process_deadline_s = 600;

/// One PE's whole part: checks, NVSHMEM, the runs; PE 0 also gathers PE 1's and writes the
/// record. The exit status.
int run_process(int pe, const Pipes& pipes, const Setup& setup, const Options& options) {
  int devices = 0, peer = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    if (pe == 0) std::fprintf(stderr, "warpvm-stencil-nvshmem: needs two CUDA devices; nothing measured\n");
    return 0;  // both processes
  }
  check(cudaDeviceCanAccessPeer(&peer, pe, 1 - pe), "cudaDeviceCanAccessPeer");
  if (peer == 0) {
    if (pe == 0) std::fprintf(stderr, "warpvm-stencil-nvshmem: GPUs 0 and 1 have no peer access; nothing measured\n");
    return 0;
  }
  check(cudaSetDevice(pe), "cudaSetDevice");
  join(pe, pipes.id_in, pipes.id_out);
  std::uint32_t blocks = 0;
  const std::vector<RunReport> mine = run_pe(pe, setup, options.repeats, blocks);
  nvshmem_finalize();
  if (pe == 1) {
    const auto bytes = static_cast<ssize_t>(mine.size() * sizeof(RunReport));
    if (write(pipes.report_out, mine.data(), mine.size() * sizeof(RunReport)) != bytes) return 1;
    return 0;
  }
  std::vector<RunReport> theirs(mine.size());
  const auto bytes = static_cast<ssize_t>(theirs.size() * sizeof(RunReport));
  if (read(pipes.report_in, theirs.data(), theirs.size() * sizeof(RunReport)) != bytes)
    throw std::runtime_error("PE 1 did not report its runs");
  Record r;
  r.workload = "stencil2gpu";
  r.mode = "nvshmem";
  r.cache_fraction = 1;
  r.dataset_bytes = std::uint64_t{setup.side} * setup.side * 4;
  r.useful_bytes = 2ull * setup.iterations * setup.side * 4;  // as stencil2gpu: each GPU's cut rows
  r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
  r.verified = true;
  for (std::size_t run = 0; run < mine.size(); ++run) {
    r.verified = r.verified && mine[run].verified && theirs[run].verified;
    if (run > 0) r.seconds.push_back(std::max(mine[run].seconds, theirs[run].seconds));  // run 0: warm-up
  }
  std::vector<double> sorted = r.seconds;
  std::sort(sorted.begin(), sorted.end());
  r.extra["seed"] = static_cast<double>(setup.seed);
  r.extra["gpus"] = 2;
  r.extra["blocks_per_gpu"] = blocks;
  r.extra["us_per_iteration"] = sorted[sorted.size() / 2] * 1e6 / setup.iterations;
  r.extra["stencil_side"] = setup.side;
  r.extra["stencil_iterations"] = setup.iterations;
  Recorder(options).write(r);
  if (!r.verified)
    std::fprintf(stderr, "warpvm-stencil-nvshmem: WRONG RESULTS (seed %llu)\n", static_cast<unsigned long long>(setup.seed));
  return r.verified ? 0 : 1;
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "channel";
  options.repeats = 5;
  Setup setup;
  setup.seed = std::random_device{}();
  CLI::App app{"warpvm-stencil-nvshmem: stencil2gpu's 2D stencil on GPUs 0 and 1, its cut rows exchanged through "
               "NVSHMEM (one process per GPU)",
               "warpvm-stencil-nvshmem"};
  add_shared_options(app, options);
  app.add_option("--stencil-side", setup.side, "the grid's side (a multiple of 64 up to 32768)");
  app.add_option("--stencil-iterations", setup.iterations, "iterations")->check(CLI::PositiveNumber);
  app.add_option("--seed", setup.seed, "seed of the grid (default: random)");
  warpvm::cli::parse(app, argc, argv);
  if (!warpvm::workloads::stencil_side_runs(setup.side))
    warpvm::cli::refuse(app, std::string("--stencil-side: ") + warpvm::workloads::stencil_side_rule);

  // Before any CUDA call: a forked child cannot use a CUDA context its parent made.
  int id_pipe[2], report_pipe[2];
  if (pipe(id_pipe) != 0 || pipe(report_pipe) != 0) {
    std::perror("warpvm-stencil-nvshmem: pipe");
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("warpvm-stencil-nvshmem: fork");
    return 1;
  }
  const int pe = child == 0 ? 1 : 0;
  // Each process keeps its own ends: a peer that dies then shows as end-of-file, not a hang.
  close(pe == 0 ? id_pipe[0] : id_pipe[1]);
  close(pe == 0 ? report_pipe[1] : report_pipe[0]);
  const Pipes pipes{pe == 0 ? -1 : id_pipe[0], pe == 0 ? id_pipe[1] : -1, pe == 0 ? report_pipe[0] : -1,
                    pe == 0 ? -1 : report_pipe[1]};
  // A peer stuck in NVSHMEM (its partner died inside a kernel or a barrier) ends at the deadline.
  std::signal(SIGALRM, [](int) {
    const char message[] = "warpvm-stencil-nvshmem: still running after the deadline; giving up\n";
    (void)!write(2, message, sizeof message - 1);
    _exit(1);
  });
  alarm(process_deadline_s);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);  // NVLink multicast off unless the caller says otherwise
  int status = 1;
  try {
    status = run_process(pe, pipes, setup, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-stencil-nvshmem: PE %d: %s\n", pe, e.what());
  }
  if (pe == 1) return status;
  if (status != 0) kill(child, SIGTERM);  // it may wait for this PE inside NVSHMEM
  int child_status = 0;
  waitpid(child, &child_status, 0);
  if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) status = 1;
  return status;
}
