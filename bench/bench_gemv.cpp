// bench_gemv [--shape IxO]... [--rounds N] [--reps N] [--min-mb M] [--rows B]
// The one-row products of a decode step (or, with --rows B, the B-row products of a step of B
// sequences decoded together: gemv.hpp's few-row kernels), each weight read once, in every layout and precision
// the decoder has, side by side (bench/results/decode.md): GB/s of weights per product, median of
// --rounds rounds that alternate the variants (a VM's memory bandwidth drifts by 10-30% within
// minutes, so only figures of the same run compare). Default shapes: Qwen2.5-0.5B's, I x O =
// QKV 896x1152, output 896x896, MLP in 896x9728, MLP out 4864x896, tied LM head 896x151936.
// Threads: OMP_NUM_THREADS. Each shape is laid out in enough copies (>= --min-mb MB, 128, of fp32
// per layout: 4x a 32 MB L3) that the reads come from memory, not from the caches. Variants:
//   fp32 [I,O] matmul   cpu::matmul_forward on the model's own layout (OpenBLAS GEMV over each
//                       thread's block of rows, partial sums added)
//   fp32 [O,I] matmul   cpu::matmul_forward on [O,I] (gemv.hpp's dot_rows_f32: generate's
//                       re-laid layers and the LM head)
//   fp32 [O,I] blas     OpenBLAS GEMV over each thread's block of outputs (the LM head before)
//   bf16 / fp16 [O,I]   cpu::gemv_half (--weights bf16 / fp16; HEADWISE_GEMV forces a kernel)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "headwise/core/host_pages.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/gemv.hpp"
#include "kernels/cpu/cblas.hpp"

namespace {

struct Shape {
  int I = 0, O = 0;
};

struct Copies {  // `n` copies of one matrix, [I,O] and [O,I] fp32 and [O,I] bf16 / fp16
  int n = 0;
  std::vector<float*> io, oi;
  std::vector<hw::cpu::HalfMatrix> bf, f16;
};

float* pages(size_t floats) { return static_cast<float*>(hw::map_host_pages(floats * sizeof(float))); }

// OpenBLAS GEMV over each thread's block of outputs of W [O,I] (row_gemv's former w_out_in path).
void blas_by_outputs(const float* w, int I, int O, const float* x, float* out) {
  const hw::blas::SingleThreaded one;
#pragma omp parallel
  {
    const int p = omp_get_thread_num(), team = omp_get_num_threads();
    const int lo = int(int64_t(O) * p / team) / 32 * 32, hi = p + 1 == team ? O : int(int64_t(O) * (p + 1) / team) / 32 * 32;
    if (hi > lo) cblas_sgemv(CblasRowMajor, CblasNoTrans, hi - lo, I, 1.f, w + int64_t(lo) * I, I, x, 1, 0.f, out + lo, 1);
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "error: %s\nusage: bench_gemv [--shape IxO]... [--rounds N] [--reps N] [--min-mb M] [--rows B]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  int rounds = 7, reps = 3, rows = 1;
  double min_mb = 128;
  for (int a = 1; a < argc; ++a) {
    const std::string k = argv[a];
    if (a + 1 >= argc) usage(("missing value after " + k).c_str());
    const char* v = argv[++a];
    if (k == "--shape") {
      Shape s;
      if (std::sscanf(v, "%dx%d", &s.I, &s.O) != 2 || s.I < 1 || s.O < 1 || int64_t(s.I) * s.O > (int64_t(1) << 31))
        usage("--shape takes IxO, e.g. 896x9728");
      shapes.push_back(s);
    } else if (k == "--rounds") {
      rounds = std::atoi(v);
    } else if (k == "--reps") {
      reps = std::atoi(v);
    } else if (k == "--rows") {
      rows = std::atoi(v);
    } else if (k == "--min-mb") {
      min_mb = std::atof(v);
    } else {
      usage(("unknown option " + k).c_str());
    }
  }
  if (rounds < 1 || reps < 1 || min_mb <= 0 || rows < 1) usage("--rounds, --reps, --min-mb and --rows must be positive");
  if (shapes.empty()) shapes = {{896, 1152}, {896, 896}, {896, 9728}, {4864, 896}, {896, 151936}};

  const char* names[] = {"fp32 [I,O] matmul", "fp32 [O,I] matmul", "fp32 [O,I] blas", "bf16 [O,I]", "fp16 [O,I]"};
  constexpr int kVariants = 5;
  std::vector<Copies> mats(shapes.size());
  int max_io = 0;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const int I = shapes[s].I, O = shapes[s].O;
    const size_t n = size_t(I) * size_t(O);
    max_io = std::max({max_io, I, O});
    Copies& c = mats[s];
    c.n = std::max(1, int(min_mb * 1e6 / (double(n) * 4) + 0.999));  // the fp32 copies of a layout >= min_mb
    for (int k = 0; k < c.n; ++k) {
      float* io = pages(n);
      float* oi = pages(n);
      uint32_t r = 12345u + uint32_t(k);
      for (size_t e = 0; e < n; ++e) {
        r = r * 1664525u + 1013904223u;
        io[e] = float(int(r >> 9) - (1 << 22)) * (1.f / float(1 << 24));
      }
      for (int i = 0; i < I; ++i)
        for (int o = 0; o < O; ++o) oi[size_t(o) * I + i] = io[size_t(i) * O + o];
      c.io.push_back(io);
      c.oi.push_back(oi);
      c.bf.push_back(hw::cpu::HalfMatrix::from_f32(io, I, O, false, hw::cpu::HalfType::BF16));
      c.f16.push_back(hw::cpu::HalfMatrix::from_f32(io, I, O, false, hw::cpu::HalfType::F16));
    }
  }
  std::vector<float> x(static_cast<size_t>(max_io) * size_t(rows), 0.5f);
  std::vector<float> out(static_cast<size_t>(max_io) * size_t(rows)), scratch;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) * 0.25f - 0.75f;

  // [shape][variant][round] GB/s
  std::vector<std::vector<std::vector<double>>> gbs(shapes.size(), std::vector<std::vector<double>>(kVariants));
  auto run = [&](size_t s, int v, int k) {
    const int I = shapes[s].I, O = shapes[s].O;
    const Copies& c = mats[s];
    switch (v) {
      case 0: hw::cpu::matmul_forward<float>(out.data(), x.data(), c.io[size_t(k)], nullptr, rows, I, O, false); break;
      case 1: hw::cpu::matmul_forward<float>(out.data(), x.data(), c.oi[size_t(k)], nullptr, rows, I, O, true); break;
      case 2:
        for (int r = 0; r < rows; ++r) blas_by_outputs(c.oi[size_t(k)], I, O, x.data() + size_t(r) * I, out.data() + size_t(r) * O);
        break;
      case 3:
        if (rows == 1) hw::cpu::gemv_half(out.data(), x.data(), c.bf[size_t(k)], nullptr);
        else hw::cpu::matmul_half(out.data(), x.data(), c.bf[size_t(k)], nullptr, rows, scratch);
        break;
      default:
        if (rows == 1) hw::cpu::gemv_half(out.data(), x.data(), c.f16[size_t(k)], nullptr);
        else hw::cpu::matmul_half(out.data(), x.data(), c.f16[size_t(k)], nullptr, rows, scratch);
        break;
    }
  };
  for (int r = 0; r < rounds; ++r)
    for (size_t s = 0; s < shapes.size(); ++s)
      for (int v = 0; v < kVariants; ++v) {
        const Copies& c = mats[s];
        for (int k = 0; k < c.n; ++k) run(s, v, k);  // warm: every copy once
        const auto t0 = std::chrono::steady_clock::now();
        for (int q = 0; q < reps; ++q)
          for (int k = 0; k < c.n; ++k) run(s, v, k);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double bytes = double(shapes[s].I) * shapes[s].O * (v < 3 ? 4.0 : 2.0) * reps * c.n;
        gbs[s][size_t(v)].push_back(bytes / sec / 1e9);
      }

  std::printf("%d-row products, %d thread(s); GB/s of weights, median of %d alternating rounds; 16-bit kernels "
              "(gemv.hpp) in brackets\n\n",
              rows, omp_get_max_threads(), rounds);
  std::printf("| I x O |");
  for (const char* n : names) std::printf(" %s |", n);
  std::printf(" [O,I] matmul / [I,O] matmul |\n|---|");
  for (int v = 0; v <= kVariants; ++v) std::printf("---:|");
  std::printf("\n");
  for (size_t s = 0; s < shapes.size(); ++s) {
    std::printf("| %d x %d |", shapes[s].I, shapes[s].O);
    double med[kVariants];
    for (int v = 0; v < kVariants; ++v) {
      std::vector<double> g = gbs[s][size_t(v)];
      std::sort(g.begin(), g.end());
      med[v] = g[g.size() / 2];
      if (v < 3)
        std::printf(" %.1f |", med[v]);
      else
        std::printf(" %.1f (%s) |", med[v],
                    hw::cpu::half_kernel_name(v == 3 ? hw::cpu::HalfType::BF16 : hw::cpu::HalfType::F16, shapes[s].I)
                        .c_str());
    }
    std::printf(" %.2f |\n", med[1] / med[0]);
  }
  return 0;
}
