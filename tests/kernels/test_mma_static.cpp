// The tensor-core routines of static (SAF) heads (tiles/mma_static_warp.hpp) run on the CPU: the
// staged parameters of a tile give the very weights of the SIMT path (tiles/static_tile.hpp), and
// one 16-row block's forward (O = P V) and backward (dV = P^T dO of 16 keys), run by an emulated
// warp pair in the kernel's order (mma_emulation.hpp), match a naive dense static head in double
// on bf16 V and dO, with ragged last tiles and head_dim 64 and 128. A stage built with a wrong rho
// index (rho[i - j + 1]) must fail the same check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_static_warp.hpp"
#include "headwise/kernels/tiles/static_tile.hpp"
#include "mma_emulation.hpp"
#include "support/rel_err.hpp"

namespace {

namespace mma = hw::tiles::mma;
using namespace hw_test_mma;  // bf, HostWarp, run_warp, word_tile, Vec

constexpr int kHalfCols = 32;  // each of a row block's two warps takes half of every 64-wide tile
constexpr double kTol = 1e-2;

struct StaticProblem {
  int64_t T = 0;
  int HD = 64;
  std::vector<float> alpha, rho, log_z;  // fp32 parameters, as the model keeps them
  Vec v, dout;                           // [T][HD], bf16 values
  Vec out, dv;                           // dense reference in double
};

StaticProblem make_problem(int64_t T, int HD, uint64_t seed) {
  StaticProblem p;
  p.T = T;
  p.HD = HD;
  hw::Rng rng(seed);
  p.alpha.resize(size_t(T));
  p.rho.resize(size_t(T));
  p.log_z.resize(size_t(T));
  for (auto& a : p.alpha) a = float(0.7 * rng.normal());
  for (int64_t d = 0; d < T; ++d) p.rho[size_t(d)] = float(-0.03 * double(d) + 0.5 * rng.normal());
  for (Vec* x : {&p.v, &p.dout}) {
    x->resize(size_t(T * HD));
    for (auto& e : *x) e = bf(rng.normal());
  }
  // log_z in double, stored as fp32 (the exact row normaliser the kernels are given)
  for (int64_t i = 0; i < T; ++i) {
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k <= i; ++k) mx = std::max(mx, double(p.alpha[size_t(k)]) + double(p.rho[size_t(i - k)]));
    for (int64_t k = 0; k <= i; ++k) s += std::exp(double(p.alpha[size_t(k)]) + double(p.rho[size_t(i - k)]) - mx);
    p.log_z[size_t(i)] = float(mx + std::log(s));
  }
  p.out.assign(size_t(T * HD), 0);
  p.dv.assign(size_t(T * HD), 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const double w =
          std::exp(double(p.alpha[size_t(j)]) + double(p.rho[size_t(i - j)]) - double(p.log_z[size_t(i)]));
      for (int c = 0; c < HD; ++c) {
        p.out[size_t(i * HD + c)] += w * p.v[size_t(j * HD + c)];
        p.dv[size_t(j * HD + c)] += w * p.dout[size_t(i * HD + c)];
      }
    }
  return p;
}

// The stage of tile (i0, j0) as the kernels build it; rho_shift != 0 plants a wrong index.
std::vector<float> stage_of(const StaticProblem& p, int64_t i0, int64_t j0, int rho_shift = 0) {
  std::vector<float> s(mma::kStaticStage);
  for (int t = 0; t < mma::kStaticStage; ++t) {
    const int tt = (t >= mma::kStaticRho && t < mma::kStaticLogZ) ? std::min(t + rho_shift, mma::kStaticLogZ - 1) : t;
    s[size_t(t)] = mma::static_stage_entry(p.alpha.data(), p.rho.data(), p.log_z.data(), i0, j0, p.T, tt);
  }
  return s;
}

// The error of one 16-row block (mma_emulation.hpp).
double block_err(const std::vector<float>& got, const Vec& ref, const StaticProblem& p, int64_t r0) {
  return row_block_err(got, ref, p.T, p.HD, r0);
}

// Forward of query rows [row0, row0 + 16) (row block rw of query tile qt), in the kernel's order:
// both warps walk the causal key tiles (halves 1 then 0), half 1 exports, half 0 adds and stores.
template <int HD>
std::vector<float> emulate_forward(const StaticProblem& p, int qt, int rw, int rho_shift = 0) {
  const int ldw = mma::ld_words(HD), ldx = HD + 8;
  const int64_t i0 = int64_t(qt) * 64, row0 = i0 + 16 * rw;
  const hw::tiles::TileRange kr = hw::tiles::static_key_tiles(qt, p.T);
  std::vector<float> xo(size_t(16 * ldx)), out(size_t(16 * HD), NAN);
  const int valid = int(std::min<int64_t>(16, p.T - row0));
  for (int half : {1, 0})
    run_warp([&](int lane) {
      float o[HD / mma::kN][4];
      mma::c_zero(o);
      for (int32_t kt = kr.lo; kt < kr.hi; ++kt) {
        const int64_t j0 = int64_t(kt) * 64, c0 = j0 + kHalfCols * half;
        if (!mma::static_block_live(row0, row0 + 15, c0, p.T)) continue;
        const auto V = word_tile(p.v, p.T, HD, j0);
        const auto stage = stage_of(p, i0, j0, rho_shift);
        const mma::StaticTile s{stage.data(), i0, j0, p.T};
        mma::static_fwd_tile<HD, kHalfCols, HostWarp>(o, s, 16 * rw, kHalfCols * half,
                                                      V.data() + kHalfCols * half * ldw, ldw, lane);
      }
      if (half == 1) {
        mma::c_export(o, xo.data(), ldx, lane);
      } else {
        mma::c_add(o, xo.data(), ldx, lane);
        mma::c_store(o, out.data(), HD, valid, lane);
      }
    });
  return out;
}

// dV of key rows [krow0, krow0 + 16) (row block rw of key tile kt) over the query tiles that weight
// the key tile, added into a block (halves 0 then 1, as the kernel adds into its shared block).
// Rows past T must stay untouched (they hold a sentinel).
template <int HD>
std::vector<float> emulate_dv(const StaticProblem& p, int kt, int rw, bool* untouched) {
  const int ldw = mma::ld_words(HD);
  const int64_t j0 = int64_t(kt) * 64, krow0 = j0 + 16 * rw;
  const hw::tiles::TileRange qr = hw::tiles::static_query_tiles(kt, p.T);
  const int valid = int(std::min<int64_t>(16, p.T - krow0));
  constexpr float kSentinel = 7.f;
  std::vector<float> acc(size_t(16 * HD), 0.f);
  for (int r = valid; r < 16; ++r) std::fill(acc.begin() + r * HD, acc.begin() + (r + 1) * HD, kSentinel);
  for (int half : {0, 1})
    run_warp([&](int lane) {
      float dv[HD / mma::kN][4];
      mma::c_zero(dv);
      for (int32_t qt = qr.lo; qt < qr.hi; ++qt) {
        const int64_t i0 = int64_t(qt) * 64, c0 = i0 + kHalfCols * half;
        if (!mma::static_block_live(c0, c0 + kHalfCols - 1, krow0, p.T)) continue;
        const auto dO = word_tile(p.dout, p.T, HD, i0);
        const auto stage = stage_of(p, i0, j0);
        const mma::StaticTile s{stage.data(), i0, j0, p.T};
        mma::static_dv_tile<HD, kHalfCols, HostWarp>(dv, s, 16 * rw, kHalfCols * half,
                                                     dO.data() + kHalfCols * half * ldw, ldw, lane);
      }
      mma::c_add_to(dv, acc.data(), HD, valid, lane);
    });
  *untouched = true;
  for (int r = valid; r < 16; ++r)
    for (int c = 0; c < HD; ++c) *untouched = *untouched && acc[size_t(r * HD + c)] == kSentinel;
  return acc;
}

// Every 16-row block of the problem, forward and backward.
template <int HD>
void check_problem(const StaticProblem& p) {
  for (int64_t r0 = 0; r0 < p.T; r0 += 16) {
    const int tile = int(r0 / 64), rw = int((r0 % 64) / 16);
    INFO("T " << p.T << " HD " << HD << " rows from " << r0);
    CHECK(block_err(emulate_forward<HD>(p, tile, rw), p.out, p, r0) <= kTol);
    bool untouched = false;
    CHECK(block_err(emulate_dv<HD>(p, tile, rw, &untouched), p.dv, p, r0) <= kTol);
    CHECK(untouched);
  }
}

TEST_CASE("mma static tiles: staged parameters give exactly the SIMT path's weights, zero off the causal set") {
  const StaticProblem p = make_problem(150, 64, 31);
  for (const auto& [i0, j0] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {64, 0}, {128, 64}, {128, 128}}) {
    const auto stage = stage_of(p, i0, j0);
    const mma::StaticTile s{stage.data(), i0, j0, p.T};
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        const int64_t i = i0 + r, j = j0 + c;
        const float want = (i < p.T && j < p.T)
                               ? hw::tiles::static_weight(p.alpha.data(), p.rho.data(), p.log_z.data(), i, j)
                               : 0.f;
        INFO("tile " << i0 << "," << j0 << " r " << r << " c " << c);
        REQUIRE(mma::static_tile_weight(s, r, c) == want);
        if (j > i || i >= p.T || j >= p.T) REQUIRE(want == 0.f);
      }
  }
  // A block wholly above the diagonal or past T has no weight; one touching it has.
  CHECK_FALSE(mma::static_block_live(0, 15, 32, 100));
  CHECK(mma::static_block_live(16, 31, 31, 100));
  CHECK_FALSE(mma::static_block_live(100, 115, 0, 100));
  CHECK_FALSE(mma::static_block_live(96, 111, 100, 100));
}

TEST_CASE("mma static tiles (emulated warps): O = P V and dV = P^T dO of 16-row blocks match a dense static head") {
  check_problem<64>(make_problem(100, 64, 41));   // two tiles, the second ragged (rows 64..99)
  check_problem<64>(make_problem(150, 64, 42));   // three tiles, ragged
  check_problem<128>(make_problem(150, 128, 43));
  check_problem<128>(make_problem(1, 128, 44));   // a single row
}

TEST_CASE("mma static tiles (emulated warps): a wrong rho index (rho[i - j + 1]) is caught") {
  const StaticProblem p = make_problem(100, 64, 51);
  double worst = 0;
  for (int64_t r0 = 0; r0 < p.T; r0 += 16) {
    const auto out = emulate_forward<64>(p, int(r0 / 64), int((r0 % 64) / 16), 1);
    worst = hw::test::worse(worst, block_err(out, p.out, p, r0));
  }
  CHECK(worst > kTol);
}

}  // namespace
