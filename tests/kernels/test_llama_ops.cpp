// The Llama-family ops: RMSNorm (the residual stream's and Qwen3's per-head q/k norm, strided,
// in place), SwiGLU and RoPE from a frequency table. Forward against the naive formulas written
// here; backward against central finite differences in double; float against double.
#include <catch2/catch.hpp>

#include "headwise/kernels/cpu.hpp"
#include "kernels/kernel_test_util.hpp"

using namespace hwtest;

namespace {

// N rows, `heads` blocks of hd per row at column col0 of rows `stride` wide.
struct Rows {
  int64_t N, heads, hd, stride, col0;
  int64_t size() const { return N * stride; }
  int64_t at(int64_t n, int64_t h, int64_t i) const { return n * stride + col0 + h * hd + i; }
};

Vec naive_rmsnorm(const Vec& x, const Vec& w, const Rows& R, double eps) {
  Vec y = x;
  for (int64_t n = 0; n < R.N; ++n)
    for (int64_t h = 0; h < R.heads; ++h) {
      double ms = 0;
      for (int64_t i = 0; i < R.hd; ++i) ms += x[size_t(R.at(n, h, i))] * x[size_t(R.at(n, h, i))];
      ms /= double(R.hd);
      for (int64_t i = 0; i < R.hd; ++i)
        y[size_t(R.at(n, h, i))] = w[size_t(i)] * x[size_t(R.at(n, h, i))] / std::sqrt(ms + eps);
    }
  return y;
}

// The kernel on the block at col0 (out and in share the layout; out starts as a copy of x).
template <class F>
std::vector<F> rms_fwd(const Vec& x, const Vec& w, const Rows& R, double eps, std::vector<F>* rstd = nullptr) {
  std::vector<F> xf = cast<F>(x), wf = cast<F>(w), y = cast<F>(x), rs(size_t(R.N * R.heads));
  hw::cpu::rmsnorm_forward(y.data() + R.col0, R.stride, rs.data(), xf.data() + R.col0, R.stride, wf.data(), R.N,
                           R.heads, R.hd, eps);
  if (rstd) *rstd = rs;
  return y;
}

}  // namespace

TEST_CASE("rmsnorm forward matches the naive formula (residual stream and strided heads)", "[kernels][llama]") {
  hw::Rng rng(11);
  for (const Rows R : {Rows{5, 1, 24, 24, 0}, Rows{4, 3, 8, 40, 8}}) {
    const Vec x = randn_f(rng, size_t(R.size()), 2.0), w = randn_f(rng, size_t(R.hd));
    const Vec want = naive_rmsnorm(x, w, R, 1e-6);
    CHECK(rel_diff(rms_fwd<double>(x, w, R, 1e-6), want) < 1e-14);
    CHECK(rel_diff(rms_fwd<float>(x, w, R, 1e-6), want) < 1e-6);
    // In place (the decoder's q/k norm) gives the same values.
    std::vector<double> y = cast<double>(x), wd = cast<double>(w);
    hw::cpu::rmsnorm_forward(y.data() + R.col0, R.stride, static_cast<double*>(nullptr), y.data() + R.col0, R.stride,
                             wd.data(), R.N, R.heads, R.hd, 1e-6);
    CHECK(rel_diff(y, want) < 1e-14);
  }
}

TEST_CASE("rmsnorm backward matches central differences (accumulate, overwrite in place)", "[kernels][llama]") {
  hw::Rng rng(12);
  const Rows R{3, 2, 6, 16, 2};
  const double eps = 1e-5;
  Vec x = randn(rng, size_t(R.size())), w = randn(rng, size_t(R.hd)), dy = randn(rng, size_t(R.size()));
  auto loss = [&] {
    const Vec y = naive_rmsnorm(x, w, R, eps);
    double s = 0;
    for (int64_t n = 0; n < R.N; ++n)
      for (int64_t h = 0; h < R.heads; ++h)
        for (int64_t i = 0; i < R.hd; ++i) s += y[size_t(R.at(n, h, i))] * dy[size_t(R.at(n, h, i))];
    return s;
  };
  const Vec gx = fd_grad(x, loss), gw = fd_grad(w, loss);
  std::vector<double> rstd;
  rms_fwd<double>(x, w, R, eps, &rstd);
  // Accumulate into a prefilled buffer.
  const Vec pre = randn(rng, size_t(R.size()));
  std::vector<double> dx = pre, dw(size_t(R.hd), 0.5);
  hw::cpu::rmsnorm_backward(dx.data() + R.col0, R.stride, dw.data(), dy.data() + R.col0, R.stride, x.data() + R.col0,
                            R.stride, w.data(), rstd.data(), R.N, R.heads, R.hd, /*accumulate=*/true);
  Vec only = minus(dx, pre);
  Vec fd_block = gx;  // the columns outside the heads have no gradient
  CHECK(fd_err(only, fd_block) < 1e-7);
  CHECK(fd_err(minus(dw, Vec(size_t(R.hd), 0.5)), gw) < 1e-7);
  // Overwrite in place on the output gradient (the model's q/k norm backward).
  std::vector<double> inplace = dy;
  hw::cpu::rmsnorm_backward(inplace.data() + R.col0, R.stride, static_cast<double*>(nullptr), inplace.data() + R.col0,
                            R.stride, x.data() + R.col0, R.stride, w.data(), rstd.data(), R.N, R.heads, R.hd,
                            /*accumulate=*/false);
  for (int64_t n = 0; n < R.N; ++n)
    for (int64_t h = 0; h < R.heads; ++h)
      for (int64_t i = 0; i < R.hd; ++i) {
        const size_t p = size_t(R.at(n, h, i));
        CHECK(std::abs(inplace[p] - gx[p]) < 1e-7 * std::max(1.0, std::abs(gx[p])));
      }
}

TEST_CASE("swiglu forward and backward match silu(gate) * up and central differences", "[kernels][llama]") {
  hw::Rng rng(13);
  const int64_t N = 4, I = 7;
  Vec x = randn_f(rng, size_t(N * 2 * I), 3.0), dy = randn(rng, size_t(N * I));
  auto naive = [&](const Vec& in) {
    Vec y(size_t(N * I));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) {
        const double g = in[size_t(n * 2 * I + i)], u = in[size_t(n * 2 * I + I + i)];
        y[size_t(n * I + i)] = g / (1.0 + std::exp(-g)) * u;
      }
    return y;
  };
  const Vec want = naive(x);
  std::vector<double> yd(size_t(N * I));
  std::vector<float> xf = cast<float>(x), yf(size_t(N * I));
  hw::cpu::swiglu_forward(yd.data(), x.data(), N, I);
  hw::cpu::swiglu_forward(yf.data(), xf.data(), N, I);
  CHECK(rel_diff(yd, want) < 1e-14);
  CHECK(rel_diff(yf, want) < 1e-6);
  const Vec g = fd_grad(x, [&] { return dot(naive(x), dy); });
  std::vector<double> dx(x.size(), 123.0);  // overwritten
  hw::cpu::swiglu_backward(dx.data(), x.data(), dy.data(), N, I);
  CHECK(fd_err(dx, g) < 1e-6);
}

TEST_CASE("rope from a frequency table at an offset: naive rotation and central differences", "[kernels][llama]") {
  hw::Rng rng(14);
  const int64_t B = 2, T = 3, heads = 2, hd = 6, stride = 20, col0 = 4, pos0 = 5;
  const Vec freqs = {0.9, 0.21, 0.013};
  Vec x = randn(rng, size_t(B * T * stride)), dy = randn(rng, x.size());
  auto naive = [&](const Vec& in) {
    Vec y = in;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < hd / 2; ++i) {
            const double a = double(pos0 + t) * freqs[size_t(i)];
            const size_t p = size_t((b * T + t) * stride + col0 + h * hd + i), q = p + size_t(hd / 2);
            y[p] = in[p] * std::cos(a) - in[q] * std::sin(a);
            y[q] = in[q] * std::cos(a) + in[p] * std::sin(a);
          }
    return y;
  };
  std::vector<double> y = x;
  hw::cpu::rope_forward_freqs(y.data(), B, T, stride, col0, heads, hd, freqs.data(), pos0);
  CHECK(rel_diff(y, naive(x)) < 1e-14);
  const Vec g = fd_grad(x, [&] { return dot(naive(x), dy); });
  std::vector<double> d = dy;
  hw::cpu::rope_backward_freqs(d.data(), B, T, stride, col0, heads, hd, freqs.data(), pos0);
  CHECK(fd_err(d, g) < 1e-7);
}
