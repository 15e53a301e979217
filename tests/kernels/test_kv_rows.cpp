// The KV row kernels (kernels/kv_rows.hpp), fp32, bf16 and fp16 rows, against a naive double loop
// on the (widened) rows, at head widths with and without a 16-lane tail and row counts with and without a 4-row
// tail, both paths (AVX-512 where the CPU has it, and the plain loops, forced); the row store
// against hand-worked roundings and fp16's range.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/kv_rows.hpp"

using namespace hw;
using namespace hw::cpu;

namespace {

float widen(uint16_t h, HalfType t) { return t == HalfType::BF16 ? bf16_to_float(h) : f16_to_float(h); }
uint16_t narrow(float f, HalfType t) { return t == HalfType::BF16 ? float_to_bf16(f) : float_to_f16(f); }

}  // namespace

TEST_CASE("kv rows: fp32 and 16-bit K q and p V, both paths, equal a naive double loop on the widened rows",
          "[kernels][kv_rows]") {
  Rng rng(17);
  int cases = 0;
  for (bool plain : {false, true}) {
    force_plain_half_kernel(plain);
    for (int type = 0; type < 3; ++type)  // bf16, fp16, fp32
      for (int64_t D : {1, 5, 8, 16, 17, 33, 48, 49, 64, 65, 80, 100, 128, 129, 200})
        for (int64_t n : {0, 1, 2, 3, 4, 5, 9, 31}) {
          const bool f32 = type == 2;
          const HalfType t = type == 0 ? HalfType::BF16 : HalfType::F16;
          std::vector<float> q(static_cast<size_t>(D)), p(static_cast<size_t>(n)), acc(static_cast<size_t>(D));
          std::vector<uint16_t> K(static_cast<size_t>(n * D)), V(static_cast<size_t>(n * D));
          // fp32 rows: the 16-bit values' widenings with a few low bits more, so none is exact in 16 bits.
          std::vector<float> K32(K.size()), V32(V.size());
          for (auto& x : q) x = float(rng.normal());
          for (auto& x : p) x = float(rng.uniform());
          for (auto& x : acc) x = float(rng.normal());
          for (auto& x : K) x = narrow(float(2.0 * rng.normal()), t);
          for (auto& x : V) x = narrow(float(rng.normal()), t);
          for (size_t i = 0; i < K.size(); ++i) {
            K32[i] = widen(K[i], t) * (1.f + float(0x1p-15 * rng.uniform()));
            V32[i] = widen(V[i], t) * (1.f + float(0x1p-15 * rng.uniform()));
          }
          auto key = [&](size_t i) { return f32 ? double(K32[i]) : double(widen(K[i], t)); };
          auto value = [&](size_t i) { return f32 ? double(V32[i]) : double(widen(V[i], t)); };
          const float scale = 0.3f;
          std::vector<float> S(static_cast<size_t>(n) + 1, -7.f);  // one guard value past the n scores
          std::vector<float> got = acc;
          if (f32) {
            kv_dot_rows(S.data(), q.data(), K32.data(), n, D, scale);
            kv_axpy_rows(got.data(), p.data(), V32.data(), n, D);
          } else {
            kv_dot_rows(S.data(), q.data(), K.data(), n, D, t, scale);
            kv_axpy_rows(got.data(), p.data(), V.data(), n, D, t);
          }
          double worst_s = 0, worst_o = 0;
          for (int64_t r = 0; r < n; ++r) {
            double s = 0, a = 0;
            for (int64_t d = 0; d < D; ++d) {
              const double x = double(q[size_t(d)]) * key(size_t(r * D + d));
              s += x;
              a += std::fabs(x);
            }
            worst_s = std::max(worst_s, std::fabs(double(S[size_t(r)]) - scale * s) / (scale * a + 1e-30));
          }
          for (int64_t d = 0; d < D; ++d) {
            double s = acc[size_t(d)], a = std::fabs(acc[size_t(d)]);
            for (int64_t r = 0; r < n; ++r) {
              const double x = double(p[size_t(r)]) * value(size_t(r * D + d));
              s += x;
              a += std::fabs(x);
            }
            worst_o = std::max(worst_o, std::fabs(double(got[size_t(d)]) - s) / (a + 1e-30));
          }
          INFO((plain ? "plain " : "avx512 ") << (f32 ? "fp32" : t == HalfType::BF16 ? "bf16" : "fp16") << " D " << D << " n " << n
                                              << ": scores " << worst_s << ", outputs " << worst_o);
          CHECK(worst_s <= 1e-6);
          CHECK(worst_o <= 1e-6);
          CHECK(S[size_t(n)] == -7.f);  // nothing written past the n rows
          ++cases;
        }
  }
  force_plain_half_kernel(false);
  CHECK(cases == 2 * 3 * 15 * 8);
}

TEST_CASE("kv rows: the store rounds to nearest even and reports fp16's range", "[kernels][kv_rows]") {
  const float inf = std::numeric_limits<float>::infinity();
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1); 1 + 3 2^-8 -> 1 + 2^-6.
  // fp16: 1 + 2^-11 -> 1; 65504 is the largest finite; 65519 rounds down to it, 65520 to inf.
  const float src[] = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, 1.f + 0x1p-11f, 65504.f, -65519.f, 1e30f};
  uint16_t b[6], h[5];
  CHECK(kv_store_row(b, src, 6, HalfType::BF16));
  CHECK(b[0] == 0x3f80);
  CHECK(b[1] == 0x3f82);
  CHECK(bf16_to_float(b[5]) == Approx(1e30).epsilon(1e-2));
  CHECK(kv_store_row(h, src, 5, HalfType::F16));
  CHECK(h[2] == 0x3c00);
  CHECK(h[3] == 0x7bff);
  CHECK(h[4] == 0xfbff);
  const float over[] = {0.5f, 65520.f};
  CHECK_FALSE(kv_store_row(h, over, 2, HalfType::F16));
  CHECK(kv_store_row(b, over, 2, HalfType::BF16));
  // Values that are already infinite or NaN are carried, not reported (fp32 decoding carries them too).
  const float odd[] = {inf, -inf, std::nanf("")};
  CHECK(kv_store_row(h, odd, 3, HalfType::F16));
  CHECK(h[0] == 0x7c00);
  CHECK(h[1] == 0xfc00);
  CHECK(std::isnan(f16_to_float(h[2])));
}
