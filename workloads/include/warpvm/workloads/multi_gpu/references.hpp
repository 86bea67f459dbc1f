#pragma once
// Host side of the placement apps (placement_workloads.cuh): inputs whose arithmetic is exact,
// conv2d's shape, and the host computations that check the single-GPU reference run, so that a
// result every mode is compared with is itself known right. Each check_* returns what is off, or
// an empty string. `parallel_for(n, body)` runs body(first, end) over a split of [0, n), as for
// build_rmat_csr; results do not depend on the split. Host code only.

#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::workloads::multi_gpu {

inline constexpr std::uint64_t conv_channels = 64;  ///< conv2d's input planes (9 x 64 = 576 GEMM k, a multiple of 64)
inline constexpr std::uint64_t conv_filters = 64;   ///< conv2d's output planes (GEMM m)

/// Floats in [-1, 1), multiples of 1/512 (so every product of two is exact in fp32), from `salt`.
template <class ParallelFor>
void fill_small_floats(std::vector<std::uint32_t>& words, std::uint64_t salt, ParallelFor&& parallel_for) {
  auto* f = reinterpret_cast<float*>(words.data());
  parallel_for(words.size(), [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) f[i] = static_cast<float>(mix64(i * 3 + salt) % 1024) / 512.0f - 1.0f;
  });
}

/// The forward DFT of `x` (its size a power of two) in double: iterative radix-2 Cooley-Tukey
/// after a bit-reversal permutation, another algorithm than fft_kernel's Stockham stages.
template <class ParallelFor>
std::vector<std::complex<double>> host_fft(const std::vector<std::complex<double>>& x, ParallelFor&& parallel_for) {
  const std::uint64_t n = x.size();
  const auto bits = static_cast<unsigned>(std::countr_zero(n));
  std::vector<std::complex<double>> y(n), twiddle(n / 2);
  parallel_for(n / 2, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t k = lo; k < hi; ++k)
      twiddle[k] = std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  });
  parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) {
      std::uint64_t reversed = 0;
      for (unsigned bit = 0; bit < bits; ++bit) reversed |= (i >> bit & 1) << (bits - 1 - bit);
      y[reversed] = x[i];
    }
  });
  for (std::uint64_t half = 1; half < n; half *= 2)
    parallel_for(n / 2, [&](std::uint64_t lo, std::uint64_t hi) {
      for (std::uint64_t butterfly = lo; butterfly < hi; ++butterfly) {
        const std::uint64_t j = butterfly % half, i = butterfly / half * 2 * half + j;
        const std::complex<double> odd = twiddle[j * (n / (2 * half))] * y[i + half];
        y[i + half] = y[i] - odd;
        y[i] += odd;
      }
    });
  return y;
}

/// conv2d's shape: `channels` input planes of height x width (square, its side a multiple of
/// `side_step`), `filters` 3 x 3 filters, "same" zero padding.
struct ConvShape {
  std::uint64_t channels = conv_channels, filters = conv_filters, height = 8, width = 8;
  [[nodiscard]] std::uint64_t pixels() const { return height * width; }
  [[nodiscard]] std::uint64_t taps() const { return channels * 9; }  ///< im2col's rows, GEMM's k
  /// The smallest square image (side a multiple of `side_step`) whose objects take at least
  /// `bytes`, where `words_per_pixel` counts the objects' 32-bit words per pixel and `fixed_words`
  /// the rest.
  static ConvShape at_least(std::uint64_t bytes, std::uint64_t words_per_pixel, std::uint64_t fixed_words,
                            std::uint64_t side_step) {
    ConvShape c;
    const double pixels = std::max(0.0, (static_cast<double>(bytes) / 4.0 - static_cast<double>(fixed_words)) /
                                            static_cast<double>(words_per_pixel));
    c.height = c.width = std::max<std::uint64_t>(
        side_step, static_cast<std::uint64_t>(std::ceil(std::sqrt(pixels) / static_cast<double>(side_step))) * side_step);
    return c;
  }
};

/// stencil2d's `sweeps` on the CPU over the n x n grid `input`: the staged kernel's index
/// arithmetic checked against the plain rule, every cell.
template <class ParallelFor>
std::string check_stencil2d(std::uint64_t n, unsigned sweeps, const std::vector<std::uint32_t>& input,
                            const std::vector<std::uint32_t>& output, ParallelFor&& parallel_for) {
  std::vector<std::uint32_t> cur = input, next(n * n);
  for (unsigned s = 0; s < sweeps; ++s) {
    parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
      for (std::uint64_t r = lo; r < hi; ++r)
        for (std::uint64_t c = 0; c < n; ++c) {
          const std::uint64_t i = r * n + c;
          std::uint32_t v = cur[i];
          if (r > 0 && r + 1 < n && c > 0 && c + 1 < n) v = v * 3 + cur[i - n] + cur[i + n] + cur[i - 1] + cur[i + 1];
          next[i] = v;
        }
    });
    std::swap(cur, next);
  }
  for (std::uint64_t i = 0; i < n * n; ++i)
    if (output[i] != cur[i])
      return "stencil2d: cell " + std::to_string(i) + " = " + std::to_string(output[i]) + ", CPU " + std::to_string(cur[i]);
  return {};
}

/// fft's n bins (`stages` = log2(n)) against host_fft of `input`, every bin within 16 log2(n)
/// 2^-24 ||x||_2: Higham's norm-wise bound for a radix-2 FFT (Accuracy and Stability of
/// Numerical Algorithms, Thm 24.2: ||error||_2 <= log2(n) eta ||X||_2, eta about 6 u plus
/// sincospif's few u, taken as 16 u) spread over the n bins (||X||_2 = sqrt(n) ||x||_2).
/// Rounding errors spread evenly: an fp32 emulation of the kernel's arithmetic peaks at about
/// 0.6 log2(n) u ||x||_2 (docs/placement.md, FFT). Says the largest error on stderr.
template <class ParallelFor>
std::string check_fft(std::uint64_t n, unsigned stages, const std::vector<std::uint32_t>& input_words,
                      const std::vector<std::uint32_t>& output, ParallelFor&& parallel_for) {
  const auto* input = reinterpret_cast<const float*>(input_words.data());
  const auto* result = reinterpret_cast<const float*>(output.data());
  std::vector<std::complex<double>> x(n);
  double norm_squared = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    x[i] = {input[2 * i], input[2 * i + 1]};
    norm_squared += std::norm(x[i]);
  }
  const std::vector<std::complex<double>> spectrum = host_fft(x, parallel_for);
  const double bound = 16.0 * stages * std::ldexp(1.0, -24) * std::sqrt(norm_squared);
  double worst_squared = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    const double error_squared = std::norm(std::complex<double>(result[2 * k], result[2 * k + 1]) - spectrum[k]);
    if (!(error_squared <= bound * bound))  // NaN too
      return "fft: bin " + std::to_string(k) + " = (" + std::to_string(result[2 * k]) + ", " +
             std::to_string(result[2 * k + 1]) + "), host FFT (" + std::to_string(spectrum[k].real()) + ", " +
             std::to_string(spectrum[k].imag()) + ")";
    worst_squared = std::max(worst_squared, error_squared);
  }
  std::fprintf(stderr, "fft: %llu points, largest bin error %.3g (bound %.3g)\n", static_cast<unsigned long long>(n),
               std::sqrt(worst_squared), bound);
  return {};
}

/// gemm's C = A B (n x n, objects 0 and 1) at 4096 sampled elements, exact: every product of two
/// inputs is exact in fp32 (fill_small_floats), so a fused multiply-add rounds as a separate add
/// does, and the host's fp32 sum in the kernel's order (k ascending, from 0) is the kernel's, bit
/// for bit.
template <class ParallelFor>
std::string check_gemm(std::uint64_t n, const std::vector<std::vector<std::uint32_t>>& objects,
                       const std::vector<std::uint32_t>& output, ParallelFor&& parallel_for) {
  const auto* a = reinterpret_cast<const float*>(objects[0].data());
  const auto* b = reinterpret_cast<const float*>(objects[1].data());
  const auto* c = reinterpret_cast<const float*>(output.data());
  constexpr std::uint64_t samples = 4096;
  std::vector<float> expected(samples);
  const auto element = [&](std::uint64_t sample) { return mix64(sample + 77) % (n * n); };
  parallel_for(samples, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t s = lo; s < hi; ++s) {
      const std::uint64_t row = element(s) / n, col = element(s) % n;
      float sum = 0;
      for (std::uint64_t i = 0; i < n; ++i) sum += a[row * n + i] * b[i * n + col];
      expected[s] = sum;
    }
  });
  for (std::uint64_t s = 0; s < samples; ++s)
    if (const std::uint64_t i = element(s); c[i] != expected[s])
      return "gemm: C[" + std::to_string(i / n) + "][" + std::to_string(i % n) + "] = " + std::to_string(c[i]) + ", host " +
             std::to_string(expected[s]);
  return {};
}

/// im2col's col (`conv2d` false) or conv2d's pixel-major result at 4096 sampled outputs, from
/// the image (object 0) and the filters (object 1): im2col exactly; conv2d against a direct
/// convolution in double, within taps x 2^-24 of the sum of the terms' magnitudes (the bound of
/// fp32 recursive summation: the GPU sums the 576 exact products, possibly fused, in order).
inline std::string check_conv(bool conv2d, const ConvShape& c, const std::vector<std::vector<std::uint32_t>>& objects,
                              const std::vector<std::uint32_t>& output) {
  const std::uint64_t hw = c.pixels(), taps = c.taps(), k = c.filters;
  const auto height = static_cast<std::uint32_t>(c.height), width = static_cast<std::uint32_t>(c.width);
  const std::vector<std::uint32_t>& image = objects[0];
  const auto at = [](const std::vector<std::uint32_t>& words, std::uint64_t i) {
    float f;
    std::memcpy(&f, &words[i], sizeof f);
    return f;
  };
  const auto pixel_value = [&](std::uint64_t ch, std::uint64_t pixel, std::uint64_t tap) {
    const long long y = static_cast<long long>(pixel / width) + static_cast<long long>(tap / 3) - 1;
    const long long x = static_cast<long long>(pixel % width) + static_cast<long long>(tap % 3) - 1;
    if (y < 0 || y >= height || x < 0 || x >= width) return 0.0f;
    return at(image, ch * hw + static_cast<std::uint64_t>(y) * width + static_cast<std::uint64_t>(x));
  };
  for (std::uint64_t sample = 0; sample < 4096; ++sample) {
    const std::uint64_t i = mix64(sample + 99) % output.size();
    if (!conv2d) {
      const std::uint64_t row = i / hw, pixel = i % hw;
      if (at(output, i) != pixel_value(row / 9, pixel, row % 9)) return "im2col: col[" + std::to_string(i) + "] is wrong";
      continue;
    }
    const std::uint64_t pixel = i / k, filter = i % k;
    double sum = 0, magnitude = 0;
    for (std::uint64_t t = 0; t < taps; ++t) {
      const double term = static_cast<double>(at(objects[1], filter * taps + t)) * pixel_value(t / 9, pixel, t % 9);
      sum += term;
      magnitude += std::abs(term);
    }
    if (std::abs(at(output, i) - sum) > static_cast<double>(taps) * std::ldexp(1.0, -24) * magnitude)
      return "conv2d: y[" + std::to_string(i) + "] = " + std::to_string(at(output, i)) + ", direct convolution " +
             std::to_string(sum);
  }
  return {};
}

}  // namespace warpvm::workloads::multi_gpu
