#include <catch2/catch.hpp>
#include <omp.h>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {

// out[n,o] = sum_i inp[n,i] * W(i,o) + bias[o], W(i,o) read from either layout.
Vec naive_matmul(const Vec& inp, const Vec& w, const Vec* bias, int64_t N, int64_t I, int64_t O, bool w_out_in) {
  Vec out(static_cast<size_t>(N * O));
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < I; i++) s += inp[n * I + i] * (w_out_in ? w[o * I + i] : w[i * O + o]);
      out[n * O + o] = s;
    }
  return out;
}

}  // namespace

TEST_CASE("matmul forward matches a triple loop in both weight layouts") {
  hw::Rng rng(1);
  const int64_t N = 5, I = 7, O = 70;  // O > 64 crosses a column block
  const Vec inp = randn(rng, N * I), w = randn(rng, I * O), bias = randn(rng, O);
  for (bool w_out_in : {false, true}) {
    for (bool with_bias : {false, true}) {
      Vec out(N * O, 123.0);  // stale contents must be overwritten
      hw::cpu::matmul_forward(out.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, I, O,
                              w_out_in);
      const Vec ref = naive_matmul(inp, w, with_bias ? &bias : nullptr, N, I, O, w_out_in);
      INFO("w_out_in=" << w_out_in << " bias=" << with_bias);
      CHECK(max_err(out, ref) < 1e-13);
    }
  }
}

TEST_CASE("matmul backward matches finite differences and accumulates") {
  hw::Rng rng(2);
  const int64_t N = 3, I = 4, O = 70;
  for (bool w_out_in : {false, true}) {
    Vec inp = randn(rng, N * I), w = randn(rng, I * O), bias = randn(rng, O);
    const Vec R = randn(rng, N * O);
    Vec out(N * O);
    auto loss = [&]() {
      hw::cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, I, O, w_out_in);
      return dot(out, R);
    };
    const Vec g_inp0 = randn(rng, N * I), g_w0 = randn(rng, I * O), g_b0 = randn(rng, O);
    Vec g_inp = g_inp0, g_w = g_w0, g_b = g_b0;
    hw::cpu::matmul_backward(g_inp.data(), g_w.data(), g_b.data(), R.data(), inp.data(), w.data(), N, I, O,
                             w_out_in);
    INFO("w_out_in=" << w_out_in);
    CHECK(fd_err(minus(g_inp, g_inp0), fd_grad(inp, loss)) < 1e-6);
    CHECK(fd_err(minus(g_w, g_w0), fd_grad(w, loss)) < 1e-6);
    CHECK(fd_err(minus(g_b, g_b0), fd_grad(bias, loss)) < 1e-6);

    // Null gradients are skipped without changing the others.
    Vec g_w_only = g_w0;
    hw::cpu::matmul_backward<double>(nullptr, g_w_only.data(), nullptr, R.data(), inp.data(), w.data(), N, I, O,
                                     w_out_in);
    CHECK(g_w_only == g_w);
  }
}

TEST_CASE("matmul float agrees with double") {
  hw::Rng rng(3);
  const int64_t N = 64, I = 33, O = 300;  // N*O above the OpenMP threshold
  for (bool w_out_in : {false, true}) {
    const Vec inp = randn_f(rng, N * I), w = randn_f(rng, I * O), bias = randn_f(rng, O), dout = randn_f(rng, N * O);
    Vec out_d(N * O), gi_d(N * I, 0.0), gw_d(I * O, 0.0), gb_d(O, 0.0);
    hw::cpu::matmul_forward(out_d.data(), inp.data(), w.data(), bias.data(), N, I, O, w_out_in);
    hw::cpu::matmul_backward(gi_d.data(), gw_d.data(), gb_d.data(), dout.data(), inp.data(), w.data(), N, I, O,
                             w_out_in);
    const auto inp_f = cast<float>(inp), w_f = cast<float>(w), bias_f = cast<float>(bias), dout_f = cast<float>(dout);
    std::vector<float> out_f(N * O), gi_f(N * I, 0.f), gw_f(I * O, 0.f), gb_f(O, 0.f);
    hw::cpu::matmul_forward(out_f.data(), inp_f.data(), w_f.data(), bias_f.data(), N, I, O, w_out_in);
    hw::cpu::matmul_backward(gi_f.data(), gw_f.data(), gb_f.data(), dout_f.data(), inp_f.data(), w_f.data(), N, I,
                             O, w_out_in);
    INFO("w_out_in=" << w_out_in);
    CHECK(rel_diff(out_f, out_d) < 1e-5);
    CHECK(rel_diff(gi_f, gi_d) < 1e-5);
    CHECK(rel_diff(gw_f, gw_d) < 1e-5);
    CHECK(rel_diff(gb_f, gb_d) < 1e-5);
  }
}

// Large GEMMs are split into blocks of C's rows (tall C) or columns (wide C), one per OpenMP
// thread. Each shape below is above the split threshold and covers one way of offsetting the
// operands: rows of A or of A^T, columns of B or of B^T.
TEST_CASE("matmul split over threads matches a triple loop for every operand layout") {
  hw::Rng rng(4);
  struct Shape {
    int64_t N, I, O;
  };
  const int keep = omp_get_max_threads();
  for (const Shape sh : {Shape{300, 80, 100}, Shape{64, 60, 700}}) {
    for (bool w_out_in : {false, true}) {
      const int64_t N = sh.N, I = sh.I, O = sh.O;
      const Vec inp = randn(rng, N * I), w = randn(rng, I * O), bias = randn(rng, O), dout = randn(rng, N * O);
      const Vec ref = naive_matmul(inp, w, &bias, N, I, O, w_out_in);
      // dinp = dout W^T, dW = inp^T dout (in W's layout), by the definition.
      Vec ref_dinp(N * I, 0.0), ref_dw(I * O, 0.0);
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < I; i++)
          for (int64_t o = 0; o < O; o++) {
            const int64_t wi = w_out_in ? o * I + i : i * O + o;
            ref_dinp[n * I + i] += dout[n * O + o] * w[wi];
            ref_dw[wi] += inp[n * I + i] * dout[n * O + o];
          }
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        Vec out(N * O, 7.0), dinp(N * I, 0.0), dw(I * O, 0.0);
        hw::cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, I, O, w_out_in);
        hw::cpu::matmul_backward<double>(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, I, O,
                                 w_out_in);
        INFO("N=" << N << " I=" << I << " O=" << O << " w_out_in=" << w_out_in << " threads=" << threads);
        CHECK(max_err(out, ref) < 1e-11);
        CHECK(max_err(dinp, ref_dinp) < 1e-11);
        CHECK(max_err(dw, ref_dw) < 1e-11);
      }
    }
  }
  omp_set_num_threads(keep);
}

TEST_CASE("matmul of one float row (a decode step) matches a double loop at 1-3 threads, both splits") {
  hw::Rng rng(9);
  struct Shape {
    int64_t I, O;
  };
  const int keep = omp_get_max_threads();
  // W [I, O] with O <= 16384 splits W's rows over the threads (I not a multiple of the 32-row
  // alignment: the last block is ragged); O > 16384 splits the columns; [O, I] splits the rows of out.
  // 300 x 500 is split too (a one-row product splits from 2^15 weights, a GEMM from 2^21);
  // 37 x 90 runs whole on the calling thread. [O, I] (an LM head) takes gemv.cpp's fp32 dot-row
  // kernel where the CPU has AVX-512: I = 17 and 5 have a masked tail, O = 4099 and 9001 rows
  // that are not a multiple of the kernel's four; its rows' results do not depend on the threads.
  for (const Shape sh : {Shape{1000, 2100}, Shape{110, 20000}, Shape{2053, 1040}, Shape{300, 500}, Shape{37, 90},
                         Shape{17, 4099}, Shape{5, 9001}}) {
    const int64_t I = sh.I, O = sh.O;
    const Vec xd = randn(rng, I), wd = randn(rng, I * O), bd = randn(rng, O);
    const std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
    for (bool w_out_in : {false, true})
      for (bool with_bias : {false, true}) {
        Vec ref(static_cast<size_t>(O));
        for (int64_t o = 0; o < O; ++o) {
          double s = with_bias ? double(b[size_t(o)]) : 0.0;
          for (int64_t i = 0; i < I; ++i) s += double(x[size_t(i)]) * double(w_out_in ? w[size_t(o * I + i)] : w[size_t(i * O + o)]);
          ref[size_t(o)] = s;
        }
        std::vector<float> one_thread;
        for (int threads : {1, 2, 3}) {
          omp_set_num_threads(threads);
          std::vector<float> out(static_cast<size_t>(O), 7.f);
          hw::cpu::matmul_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, 1, I, O, w_out_in);
          double worst = 0;
          for (int64_t o = 0; o < O; ++o) worst = std::max(worst, std::abs(double(out[size_t(o)]) - ref[size_t(o)]));
          INFO("I=" << I << " O=" << O << " w_out_in=" << w_out_in << " bias=" << with_bias << " threads=" << threads);
          CHECK(worst < 2e-3);  // fp32 sums of ~1000-2000 unit-variance products: ~1e-4 typical
          if (threads == 1) one_thread = out;
          else if (w_out_in) CHECK(out == one_thread);  // each output one full dot, in one order
        }
      }
  }
  omp_set_num_threads(keep);
}

TEST_CASE("matmul of a few float rows (batched decoding) matches a double loop, each row with W [O, I] bit for bit its one-row product") {
  hw::Rng rng(13);
  struct Shape {
    int64_t I, O;
  };
  const int keep = omp_get_max_threads();
  // N: every pass height of gemv.hpp's few_rows_f32 (4 rows, then 3, 2 or 1) up to the widest
  // few-row product; I = 17, 5: masked tails; O = 4099: rows not a multiple of the pass's four.
  for (const Shape sh : {Shape{300, 500}, Shape{17, 4099}, Shape{5, 70}, Shape{1000, 2100}})
    for (int64_t N : {2, 3, 5, 8, 13, 32}) {
      const int64_t I = sh.I, O = sh.O;
      const Vec xd = randn(rng, N * I), wd = randn(rng, I * O), bd = randn(rng, O);
      const std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
      for (bool w_out_in : {false, true})
        for (int threads : {1, 2, 3}) {
          omp_set_num_threads(threads);
          std::vector<float> out(size_t(N * O), 7.f);
          hw::cpu::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, I, O, w_out_in);
          double worst = 0;
          for (int64_t r = 0; r < N; ++r) {
            for (int64_t o = 0; o < O; ++o) {
              double s = double(b[size_t(o)]);
              for (int64_t i = 0; i < I; ++i)
                s += double(x[size_t(r * I + i)]) * double(w_out_in ? w[size_t(o * I + i)] : w[size_t(i * O + o)]);
              worst = std::max(worst, std::abs(double(out[size_t(r * O + o)]) - s));
            }
            if (w_out_in) {
              std::vector<float> alone(size_t(O), 5.f);
              hw::cpu::matmul_forward(alone.data(), x.data() + r * I, w.data(), b.data(), 1, I, O, true);
              INFO("I=" << I << " O=" << O << " N=" << N << " row " << r << " threads=" << threads);
              CHECK(std::equal(alone.begin(), alone.end(), out.begin() + r * O));
            }
          }
          INFO("I=" << I << " O=" << O << " N=" << N << " w_out_in=" << w_out_in << " threads=" << threads);
          CHECK(worst < 2e-3);
        }
    }
  omp_set_num_threads(keep);
}
