// The GPU static-head tile math (include/headwise/kernels/tiles/static_tile.hpp): its tile
// ranges against brute-force causal visibility, and its tile products chained over tiles in
// the device's order against the CPU entry point (attn::layer_forward / layer_backward) and
// the dense reference, in double and float, for T not a multiple of the tile.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "headwise/kernels/tiles/static_tile.hpp"
#include "support/rel_err.hpp"

namespace {

using namespace hw::tiles;

// max |a - b| / max(max |b|, 1): one relative error per tensor (inputs are O(1)).
template <class A, class B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  REQUIRE(a.size() == b.size());
  return hw::test::max_rel_err_floor(a, b, 1.0);  // a NaN or an infinity on either side: infinite
}

// Whether some query row of tile qt sees some key of tile kt (causal, inside [0, T)).
bool tiles_meet(int64_t qt, int64_t kt, int64_t T) {
  for (int64_t i = qt * kBr; i < std::min(T, (qt + 1) * kBr); ++i)
    for (int64_t j = kt * kBc; j < std::min(T, (kt + 1) * kBc); ++j)
      if (j <= i) return true;
  return false;
}

// out rows of one static head, query tile by query tile, key tiles from static_key_tiles.
template <class F>
std::vector<F> tiled_forward(const std::vector<F>& alpha, const std::vector<F>& rho, const std::vector<F>& log_z,
                             const std::vector<F>& v, int64_t T, int D) {
  std::vector<F> out(size_t(T * D), F(0)), P(size_t(kBr * kBc));
  for (int32_t qt = 0; qt < ceil_div(T, kBr); ++qt) {
    const int64_t i0 = int64_t(qt) * kBr;
    const int m = tile_rows(qt, kBr, T);
    const TileRange kr = static_key_tiles(qt, T);
    for (int32_t kt = kr.lo; kt < kr.hi; ++kt) {
      const int64_t j0 = int64_t(kt) * kBc;
      const int n = tile_rows(kt, kBc, T);
      static_p_tile(P.data(), kBc, alpha.data(), rho.data(), log_z.data(), i0, m, j0, n);
      static_pv_acc(out.data() + i0 * D, D, P.data(), kBc, v.data() + j0 * D, D, m, n, D);
    }
  }
  return out;
}

// dV of one static head added into dv, key tile by key tile, query tiles from static_query_tiles.
template <class F>
void tiled_backward(std::vector<F>& dv, const std::vector<F>& alpha, const std::vector<F>& rho,
                    const std::vector<F>& log_z, const std::vector<F>& dout, int64_t T, int D) {
  std::vector<F> P(size_t(kBr * kBc));
  for (int32_t kt = 0; kt < ceil_div(T, kBc); ++kt) {
    const int64_t j0 = int64_t(kt) * kBc;
    const int n = tile_rows(kt, kBc, T);
    const TileRange qr = static_query_tiles(kt, T);
    for (int32_t qt = qr.lo; qt < qr.hi; ++qt) {
      const int64_t i0 = int64_t(qt) * kBr;
      const int m = tile_rows(qt, kBr, T);
      static_p_tile(P.data(), kBc, alpha.data(), rho.data(), log_z.data(), i0, m, j0, n);
      static_ptdo_acc(dv.data() + j0 * D, D, P.data(), kBc, dout.data() + i0 * D, D, m, n, D);
    }
  }
}

// Two static heads sharing one KV head (their dV contributions add), B = 2.
template <class F>
void check_static(int64_t T, int D, unsigned seed, double tol) {
  const ref::Layer l = fx::make_layer({fx::spec("static"), fx::spec("static")}, 1, D, 2, T, seed);
  const auto R = fx::random_r(l, seed + 1);
  fx::Packed<F> p(l);
  for (int64_t b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) p.dout_at(b, h, t, d) = F(R[size_t(b)][size_t(h)][size_t(t * D + d)]);
  p.forward();
  p.backward();
  const auto ref_out = ref::forward(l);
  const auto ref_g = ref::backward(l, R);
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<F> v(size_t(T * D)), dv(size_t(T * D), F(0)), cpu_dv(size_t(T * D));
    for (int64_t t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d) {
        v[size_t(t * D + d)] = p.qkv_at(b, t, p.layout.v_col(0) + d);
        cpu_dv[size_t(t * D + d)] = p.dqkv_at(b, t, p.layout.v_col(0) + d);
      }
    for (int h = 0; h < 2; ++h) {
      INFO("T " << T << " sequence " << b << " head " << h);
      const std::vector<F> out = tiled_forward(p.alpha[size_t(h)], p.rho[size_t(h)], p.log_z[size_t(h)], v, T, D);
      std::vector<F> cpu_out(size_t(T * D)), dout(size_t(T * D));
      for (int64_t t = 0; t < T; ++t)
        for (int d = 0; d < D; ++d) {
          cpu_out[size_t(t * D + d)] = p.out_at(b, h, t, d);
          dout[size_t(t * D + d)] = p.dout_at(b, h, t, d);
        }
      CHECK(rel_err(out, cpu_out) <= tol);
      CHECK(rel_err(out, ref_out[size_t(b)][size_t(h)]) <= tol);
      tiled_backward(dv, p.alpha[size_t(h)], p.rho[size_t(h)], p.log_z[size_t(h)], dout, T, D);
    }
    INFO("dV, T " << T << " sequence " << b);
    CHECK(rel_err(dv, cpu_dv) <= tol);
    CHECK(rel_err(dv, ref_g.dv[size_t(b)][0]) <= tol);
  }
}

}  // namespace

TEST_CASE("static tile ranges hold exactly the tiles that meet causally") {
  for (int64_t T : {1, 7, 63, 64, 65, 100, 257}) {
    const int64_t n_tiles = ceil_div(T, kBr);
    for (int32_t qt = 0; qt < n_tiles; ++qt) {
      const TileRange kr = static_key_tiles(qt, T);
      for (int32_t kt = 0; kt < ceil_div(T, kBc); ++kt) {
        INFO("T " << T << " query tile " << qt << " key tile " << kt);
        CHECK((kt >= kr.lo && kt < kr.hi) == tiles_meet(qt, kt, T));
        const TileRange qr = static_query_tiles(kt, T);
        CHECK((qt >= qr.lo && qt < qr.hi) == tiles_meet(qt, kt, T));
      }
    }
  }
}

TEST_CASE("static_weight is the normalised causal weight and flushes underflow to zero") {
  const std::vector<double> alpha = {0.3, -1.2, 0.8}, rho = {0.1, -0.4, 2.0};
  const auto log_z = ref::static_log_z(alpha, rho, 3);
  for (int64_t i = 0; i < 3; ++i) {
    double row = 0;
    for (int64_t j = 0; j < 3; ++j) {
      const double p = static_weight(alpha.data(), rho.data(), log_z.data(), i, j);
      if (j > i) CHECK(p == 0.0);
      else CHECK(p == Approx(std::exp(alpha[size_t(j)] + rho[size_t(i - j)] - log_z[size_t(i)])).epsilon(1e-15));
      row += p;
    }
    CHECK(row == Approx(1.0).epsilon(1e-14));
  }
  CHECK(exp_flush(-90.0f) == 0.0f);
  CHECK(exp_flush(-86.0f) > 0.0f);
  CHECK(exp_flush(-709.0) == 0.0);
}

TEST_CASE("static tiles chained equal the CPU entry point and the dense reference") {
  for (int64_t T : {1, 7, 64, 100, 257}) {
    check_static<double>(T, 16, 40u + unsigned(T), 1e-10);
    check_static<float>(T, 16, 50u + unsigned(T), 1e-5);
  }
  check_static<float>(100, 64, 60u, 1e-5);
}
