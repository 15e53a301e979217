// Every non-attention op of the CUDA backend (exact fp32 GEMMs) against the CPU reference run
// in double on the same float inputs: seeded random non-zero inputs, gradients pre-filled so
// accumulation is checked, null gradient pointers, both weight layouts, odd sizes. Error is
// max |gpu - ref| / max |ref|, at most 1e-5 for the fp32 paths.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "headwise/core/error.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cuda/cuda_stream.hpp"

namespace hw::cudatest {
namespace {

constexpr double kTol = 1e-5;

struct MatmulShape {
  int64_t N, I, O;
};
const MatmulShape kShapes[] = {{37, 50, 70}, {256, 768, 3072}};

TEST_CASE("cuda matmul_forward matches the reference (bias or not, both W layouts, out overwritten)") {
  const auto& be = exact_backend();
  for (const auto& s : kShapes) {
    for (bool w_out_in : {false, true}) {
      for (bool with_bias : {true, false}) {
        INFO("N=" << s.N << " I=" << s.I << " O=" << s.O << " w_out_in=" << w_out_in << " bias=" << with_bias);
        Twin inp(be, random_vector(s.N * s.I, 1)), w(be, random_vector(s.I * s.O, 2)),
            bias(be, random_vector(s.O, 3)), out(be, random_vector(s.N * s.O, 4, 50.0f, 60.0f));
        be.matmul_forward(out.d(), inp.d(), w.d(), with_bias ? bias.d() : nullptr, s.N, s.I, s.O, w_out_in);
        reference().matmul_forward(out.r(), inp.r(), w.r(), with_bias ? bias.r() : nullptr, s.N, s.I, s.O,
                                   w_out_in);
        CHECK(out.err(be) <= kTol);
      }
    }
  }
}

TEST_CASE("cuda matmul_backward accumulates dinp, dW, dbias and skips null gradients") {
  const auto& be = exact_backend();
  // Which gradients are requested: all, then each one left out.
  const bool masks[4][3] = {{true, true, true}, {false, true, true}, {true, false, true}, {true, true, false}};
  for (const auto& s : kShapes) {
    for (bool w_out_in : {false, true}) {
      for (const auto& m : masks) {
        INFO("N=" << s.N << " I=" << s.I << " O=" << s.O << " w_out_in=" << w_out_in << " dinp=" << m[0]
                  << " dw=" << m[1] << " dbias=" << m[2]);
        Twin inp(be, random_vector(s.N * s.I, 11)), w(be, random_vector(s.I * s.O, 12)),
            dout(be, random_vector(s.N * s.O, 13));
        Twin dinp(be, random_vector(s.N * s.I, 14)), dw(be, random_vector(s.I * s.O, 15)),
            dbias(be, random_vector(s.O, 16));
        be.matmul_backward(m[0] ? dinp.d() : nullptr, m[1] ? dw.d() : nullptr, m[2] ? dbias.d() : nullptr, dout.d(),
                           inp.d(), w.d(), s.N, s.I, s.O, w_out_in);
        reference().matmul_backward(m[0] ? dinp.r() : nullptr, m[1] ? dw.r() : nullptr, m[2] ? dbias.r() : nullptr,
                                    dout.r(), inp.r(), w.r(), s.N, s.I, s.O, w_out_in);
        // A skipped gradient keeps its pre-filled values, which the untouched twin also has.
        CHECK(dinp.err(be) <= kTol);
        CHECK(dw.err(be) <= kTol);
        CHECK(dbias.err(be) <= kTol);
      }
    }
  }
}

TEST_CASE("cuda matmul_gelu_forward writes the pre-activation and its GELU") {
  const auto& be = exact_backend();
  for (const auto& s : kShapes) {
    INFO("N=" << s.N << " I=" << s.I << " O=" << s.O);
    Twin inp(be, random_vector(s.N * s.I, 21)), w(be, random_vector(s.I * s.O, 22)), bias(be, random_vector(s.O, 23));
    Twin pre(be, random_vector(s.N * s.O, 24)), out(be, random_vector(s.N * s.O, 25));
    be.matmul_gelu_forward(pre.d(), out.d(), inp.d(), w.d(), bias.d(), s.N, s.I, s.O);
    reference().matmul_gelu_forward(pre.r(), out.r(), inp.r(), w.r(), bias.r(), s.N, s.I, s.O);
    CHECK(pre.err(be) <= kTol);
    CHECK(out.err(be) <= kTol);
  }
}

TEST_CASE("cuda layernorm forward, backward and residual_layernorm_forward") {
  const auto& be = exact_backend();
  const double eps = 1e-5;
  for (auto [N, C] : {std::pair<int64_t, int64_t>{37, 70}, {64, 768}}) {
    INFO("N=" << N << " C=" << C);
    // Rows with an offset, so the mean matters.
    Twin inp(be, random_vector(N * C, 31, 0.5f, 2.5f)), weight(be, random_vector(C, 32)), bias(be, random_vector(C, 33));
    Twin out(be, random_vector(N * C, 34)), mean(be, random_vector(N, 35)), rstd(be, random_vector(N, 36));
    be.layernorm_forward(out.d(), mean.d(), rstd.d(), inp.d(), weight.d(), bias.d(), N, C, eps);
    reference().layernorm_forward(out.r(), mean.r(), rstd.r(), inp.r(), weight.r(), bias.r(), N, C, eps);
    CHECK(out.err(be) <= kTol);
    CHECK(mean.err(be) <= kTol);
    CHECK(rstd.err(be) <= kTol);

    // Backward from the reference's mean/rstd (uploaded as floats to both sides).
    const std::vector<float> mean_f(mean.ref.begin(), mean.ref.end()), rstd_f(rstd.ref.begin(), rstd.ref.end());
    Twin mean_in(be, mean_f), rstd_in(be, rstd_f), dout(be, random_vector(N * C, 37));
    Twin dinp(be, random_vector(N * C, 38)), dweight(be, random_vector(C, 39)), dbias(be, random_vector(C, 40));
    be.layernorm_backward(dinp.d(), dweight.d(), dbias.d(), dout.d(), inp.d(), weight.d(), mean_in.d(), rstd_in.d(),
                          N, C);
    reference().layernorm_backward(dinp.r(), dweight.r(), dbias.r(), dout.r(), inp.r(), weight.r(), mean_in.r(),
                                   rstd_in.r(), N, C);
    CHECK(dinp.err(be) <= kTol);
    CHECK(dweight.err(be) <= kTol);
    CHECK(dbias.err(be) <= kTol);

    Twin a(be, random_vector(N * C, 41)), b(be, random_vector(N * C, 42)), resid(be, random_vector(N * C, 43));
    Twin ln(be, random_vector(N * C, 44)), mean2(be, random_vector(N, 45)), rstd2(be, random_vector(N, 46));
    be.residual_layernorm_forward(resid.d(), ln.d(), mean2.d(), rstd2.d(), a.d(), b.d(), weight.d(), bias.d(), N, C,
                                  eps);
    reference().residual_layernorm_forward(resid.r(), ln.r(), mean2.r(), rstd2.r(), a.r(), b.r(), weight.r(),
                                           bias.r(), N, C, eps);
    CHECK(resid.err(be) <= kTol);
    CHECK(ln.err(be) <= kTol);
    CHECK(mean2.err(be) <= kTol);
    CHECK(rstd2.err(be) <= kTol);
  }
}

TEST_CASE("cuda gelu forward and backward (accumulating)") {
  const auto& be = exact_backend();
  const int64_t n = 100003;
  Twin inp(be, random_vector(n, 51, -6.0f, 6.0f)), out(be, random_vector(n, 52)), dout(be, random_vector(n, 53));
  Twin dinp(be, random_vector(n, 54));
  be.gelu_forward(out.d(), inp.d(), n);
  reference().gelu_forward(out.r(), inp.r(), n);
  CHECK(out.err(be) <= kTol);
  be.gelu_backward(dinp.d(), inp.d(), dout.d(), n);
  reference().gelu_backward(dinp.r(), inp.r(), dout.r(), n);
  CHECK(dinp.err(be) <= kTol);
}

TEST_CASE("cuda encoder forward and backward with repeated tokens") {
  const auto& be = exact_backend();
  const int64_t B = 3, T = 37, C = 70, V = 5;  // 111 tokens from a vocabulary of 5: many repeats
  std::vector<int32_t> tokens(static_cast<size_t>(B * T));
  for (size_t i = 0; i < tokens.size(); i++) tokens[i] = static_cast<int32_t>((i * 7 + i / 3) % V);
  const auto d_tokens = upload(be, tokens);
  Twin wte(be, random_vector(V * C, 61)), wpe(be, random_vector(T * C, 62)), dout(be, random_vector(B * T * C, 63));
  for (bool with_wpe : {true, false}) {
    INFO("wpe=" << with_wpe);
    Twin out(be, random_vector(B * T * C, 64));
    be.encoder_forward(out.d(), d_tokens->get(), wte.d(), with_wpe ? wpe.d() : nullptr, B, T, C);
    reference().encoder_forward(out.r(), tokens.data(), wte.r(), with_wpe ? wpe.r() : nullptr, B, T, C);
    CHECK(out.err(be) <= kTol);

    Twin dwte(be, random_vector(V * C, 65)), dwpe(be, random_vector(T * C, 66));
    be.encoder_backward(dwte.d(), with_wpe ? dwpe.d() : nullptr, dout.d(), d_tokens->get(), B, T, C);
    reference().encoder_backward(dwte.r(), with_wpe ? dwpe.r() : nullptr, dout.r(), tokens.data(), B, T, C);
    CHECK(dwte.err(be) <= kTol);
    CHECK(dwpe.err(be) <= kTol);
  }
}

TEST_CASE("cuda residual_forward, accumulate, scale and fill_zero") {
  const auto& be = exact_backend();
  const int64_t n = 12345;
  Twin a(be, random_vector(n, 71)), b(be, random_vector(n, 72)), out(be, random_vector(n, 73));
  be.residual_forward(out.d(), a.d(), b.d(), n);
  reference().residual_forward(out.r(), a.r(), b.r(), n);
  CHECK(out.err(be) <= kTol);
  be.residual_forward(a.d(), a.d(), b.d(), n);  // out aliasing a
  reference().residual_forward(a.r(), a.r(), b.r(), n);
  CHECK(a.err(be) <= kTol);

  Twin dst(be, random_vector(n, 74));
  be.accumulate(dst.d(), b.d(), n);
  reference().accumulate(dst.r(), b.r(), n);
  CHECK(dst.err(be) <= kTol);

  be.scale(dst.d(), 0.37f, n);
  reference().scale(dst.r(), double(0.37f), n);
  CHECK(dst.err(be) <= kTol);

  be.fill_zero(dst.d(), n - 1);  // the last element stays
  reference().fill_zero(dst.r(), n - 1);
  const auto got = dst.got(be);
  CHECK(got[0] == 0.0f);
  CHECK(got[static_cast<size_t>(n - 2)] == 0.0f);
  CHECK(got[static_cast<size_t>(n - 1)] == static_cast<float>(dst.ref[static_cast<size_t>(n - 1)]));
  CHECK(got[static_cast<size_t>(n - 1)] != 0.0f);
}

TEST_CASE("cuda crossentropy_forward_backward with ignored targets") {
  const auto& be = exact_backend();
  for (auto [N, V] : {std::pair<int64_t, int64_t>{37, 70}, {64, 50257}}) {
    INFO("N=" << N << " V=" << V);
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; i++)
      targets[static_cast<size_t>(i)] = i % 5 == 3 ? cpu::kIgnoreTarget : static_cast<int32_t>((i * 7919) % V);
    const auto d_targets = upload(be, targets);
    const auto logits_host = random_vector(N * V, 81, -4.0f, 4.0f);
    const double dloss = 1.0 / double(N);

    Twin logits(be, logits_host), losses(be, random_vector(N, 82)), dlogits(be, random_vector(N * V, 83));
    const double got = be.crossentropy_forward_backward(losses.d(), dlogits.d(), logits.d(), d_targets->get(), N, V,
                                                        dloss);
    const double ref = reference().crossentropy_forward_backward(losses.r(), dlogits.r(), logits.r(),
                                                                 targets.data(), N, V, dloss);
    CHECK(std::fabs(got - ref) <= kTol * std::fabs(ref));
    CHECK(losses.err(be) <= kTol);
    CHECK(dlogits.err(be) <= kTol);
    // Ignored rows: no loss, zero gradient.
    const auto dl = dlogits.got(be);
    CHECK(losses.got(be)[3] == 0.0f);
    CHECK(*std::max_element(dl.begin() + 3 * V, dl.begin() + 4 * V) == 0.0f);
    CHECK(*std::min_element(dl.begin() + 3 * V, dl.begin() + 4 * V) == 0.0f);

    // Loss only (no gradient, no per-row losses), and the gradient written over the logits.
    const double got_loss_only =
        be.crossentropy_forward_backward(nullptr, nullptr, logits.d(), d_targets->get(), N, V, dloss);
    CHECK(std::fabs(got_loss_only - ref) <= kTol * std::fabs(ref));
    Twin in_place(be, logits_host);
    be.crossentropy_forward_backward(nullptr, in_place.d(), in_place.d(), d_targets->get(), N, V, dloss);
    reference().crossentropy_forward_backward(nullptr, in_place.r(), in_place.r(), targets.data(), N, V, dloss);
    CHECK(in_place.err(be) <= kTol);
  }
}

TEST_CASE("cuda rope forward and backward on a column range of wider rows") {
  const auto& be = exact_backend();
  const int64_t B = 2, T = 37, n_heads = 3, hd = 16, row_stride = 3 * n_heads * hd + 5;
  const double theta = 10000.0;
  for (int64_t col0 : {int64_t(0), n_heads * hd}) {
    INFO("col0=" << col0);
    Twin x(be, random_vector(B * T * row_stride, 91));
    be.rope_forward(x.d(), B, T, row_stride, col0, n_heads, hd, theta);
    reference().rope_forward(x.r(), B, T, row_stride, col0, n_heads, hd, theta);
    CHECK(x.err(be) <= kTol);
    Twin dx(be, random_vector(B * T * row_stride, 92));
    be.rope_backward(dx.d(), B, T, row_stride, col0, n_heads, hd, theta);
    reference().rope_backward(dx.r(), B, T, row_stride, col0, n_heads, hd, theta);
    CHECK(dx.err(be) <= kTol);
  }
  Twin x(be, random_vector(T * 10, 93));
  CHECK_THROWS_AS(be.rope_forward(x.d(), 1, T, 10, 0, 1, 5, theta), Error);  // odd head width
  CHECK_THROWS_AS(be.rope_backward(x.d(), 1, T, 10, 0, 1, 4, 0.0), Error);  // theta 0
}

TEST_CASE("cuda sum_squares in double") {
  const auto& be = exact_backend();
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1000003)}) {
    INFO("n=" << n);
    Twin x(be, random_vector(n, 101));
    const double got = be.sum_squares(x.d(), n);
    const double ref = reference().sum_squares(x.r(), n);
    CHECK(std::fabs(got - ref) <= 1e-9 * ref);  // both accumulate float squares in double
  }
}

TEST_CASE("cuda adamw_update") {
  const auto& be = exact_backend();
  const int64_t n = 100007;
  AdamWStep s;
  s.decay = 0.999f;
  s.beta1 = 0.9f;
  s.beta2 = 0.95f;
  s.eps = 1e-8f;
  s.bc2_sqrt = 0.3f;
  s.step_size = 1e-3f;
  Twin p(be, random_vector(n, 111)), g(be, random_vector(n, 112)), m(be, random_vector(n, 113, -0.1f, 0.1f)),
      v(be, random_vector(n, 114, 0.0f, 0.01f));
  be.adamw_update(p.d(), g.d(), m.d(), v.d(), n, s);
  reference().adamw_update(p.r(), g.r(), m.r(), v.r(), n, s);
  CHECK(p.err(be) <= kTol);
  CHECK(m.err(be) <= kTol);
  CHECK(v.err(be) <= kTol);
}

TEST_CASE("cuda backend: copies, stream, ranges and identity") {
  const auto& be = exact_backend();
  CHECK(be.device() == Device::CUDA);
  CHECK(cuda::cuda_stream_of(be) != nullptr);
  CHECK(cuda::cuda_stream_of(cpu_backend<float>()) == nullptr);
  const auto host = random_vector(1000, 121);
  const auto d = upload(be, host);
  be.range_push("test range");
  be.scale(d->get(), 2.0f, 1000);
  be.range_pop();
  be.synchronize();
  const auto back = download(be, *d);
  for (size_t i = 0; i < host.size(); i++) REQUIRE(back[i] == 2.0f * host[i]);  // exact: a power of two
}

}  // namespace
}  // namespace hw::cudatest
