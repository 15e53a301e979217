// The tensor-core fragments of the bf16 attention (tiles/mma_fragments.hpp) against facts written
// here by hand from the PTX ISA tables (section 9.7.14.5.8, m16n8k16 floating point types), and the
// warp-level tile routines (tiles/mma_attention_warp.hpp) run on the CPU: the 32 lanes of a warp
// are 32 threads executing the kernel's own lane code, the warp's mma is gathered from the lanes'
// fragments with the layout functions, multiplied in double and scattered back, and the quad
// shuffle goes through shared slots (the emulator lives in mma_emulation.hpp). One 16-row block's
// forward (O, log-sum-exp) and backward (dQ, and dK/dV of a 16-key block) are checked against a
// naive dense softmax attention in double on bf16 values, with causal, window and sink masks and
// ragged last tiles.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/mma_attention_warp.hpp"
#include "headwise/kernels/tiles/mma_fragments.hpp"
#include "headwise/kernels/tiles/mma_tf32.hpp"
#include "mma_emulation.hpp"
#include "support/rel_err.hpp"

namespace {

namespace mma = hw::tiles::mma;
using hw::tiles::KeyRule;
using Vec = std::vector<double>;

using namespace hw_test_mma;  // bf, lo_of, hi_of, HostWarp, run_warp, word_tile (mma_emulation.hpp)

// ---------------- (1) layouts against the PTX tables ----------------

TEST_CASE("mma fragments: lane coordinates match hand-derived PTX facts") {
  // A: lane 5 (groupID 1, threadID_in_group 1) holds rows 1 and 9, columns 2,3 and 10,11.
  const mma::Coord a5[8] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}};
  for (int i = 0; i < 8; ++i) {
    CHECK(mma::a_coord(5, i).row == a5[i].row);
    CHECK(mma::a_coord(5, i).col == a5[i].col);
  }
  // A: lane 0 a0 = (0,0); lane 31 (group 7, tig 3) a7 = (15, 15); lane 14 (group 3, tig 2) a4 = (3, 12).
  CHECK((mma::a_coord(0, 0).row == 0 && mma::a_coord(0, 0).col == 0));
  CHECK((mma::a_coord(31, 7).row == 15 && mma::a_coord(31, 7).col == 15));
  CHECK((mma::a_coord(14, 4).row == 3 && mma::a_coord(14, 4).col == 12));
  CHECK((mma::a_coord(14, 3).row == 11 && mma::a_coord(14, 3).col == 5));
  // B (k x n): lane 5 holds k 2,3 and 10,11 of column n = 1; lane 30 (group 7, tig 2): k 4,5,12,13 of n 7.
  const mma::Coord b5[4] = {{2, 1}, {3, 1}, {10, 1}, {11, 1}};
  const mma::Coord b30[4] = {{4, 7}, {5, 7}, {12, 7}, {13, 7}};
  for (int i = 0; i < 4; ++i) {
    CHECK((mma::b_coord(5, i).row == b5[i].row && mma::b_coord(5, i).col == b5[i].col));
    CHECK((mma::b_coord(30, i).row == b30[i].row && mma::b_coord(30, i).col == b30[i].col));
  }
  // C/D: lane 5 holds (1,2) (1,3) (9,2) (9,3); lane 27 (group 6, tig 3): (6,6) (6,7) (14,6) (14,7).
  const mma::Coord c5[4] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}};
  const mma::Coord c27[4] = {{6, 6}, {6, 7}, {14, 6}, {14, 7}};
  for (int i = 0; i < 4; ++i) {
    CHECK((mma::c_coord(5, i).row == c5[i].row && mma::c_coord(5, i).col == c5[i].col));
    CHECK((mma::c_coord(27, i).row == c27[i].row && mma::c_coord(27, i).col == c27[i].col));
  }
  // Row ownership: lane 13 updates rows 3 and 11 and shares them with lanes 12, 14, 15.
  CHECK(mma::owned_row(13, 0) == 3);
  CHECK(mma::owned_row(13, 1) == 11);
  std::set<int> quad = {13 ^ mma::kQuadXor0, 13 ^ mma::kQuadXor1, 13 ^ mma::kQuadXor0 ^ mma::kQuadXor1};
  CHECK(quad == std::set<int>{12, 14, 15});
  for (int i = 0; i < 4; ++i) CHECK(mma::c_coord(13, i).row == mma::owned_row(13, mma::c_row_half(i)));
}

// Both instructions' layouts: bf16 m16n8k16 (this file) and tf32 m16n8k8 (tiles/mma_tf32.hpp).
TEST_CASE("mma fragments: every operand's (lane, element) map is a bijection onto its tile") {
  auto check = [](int rows, int cols, int per_lane, mma::Coord (*f)(int, int)) {
    std::set<std::pair<int, int>> seen;
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < per_lane; ++i) {
        const mma::Coord p = f(lane, i);
        CHECK((p.row >= 0 && p.row < rows && p.col >= 0 && p.col < cols));
        seen.insert({p.row, p.col});
      }
    CHECK(static_cast<int>(seen.size()) == rows * cols);
    CHECK(32 * per_lane == rows * cols);
  };
  check(16, 16, mma::kAElems, mma::a_coord);
  check(16, 8, mma::kBElems, mma::b_coord);
  check(16, 8, mma::kCElems, mma::c_coord);
  check(16, 8, mma::kTf32AElems, mma::tf32_a_coord);
  check(8, 8, mma::kTf32BElems, mma::tf32_b_coord);
}

TEST_CASE("mma fragments: a C-fragment pair becomes the A fragment of the same 16x16 values") {
  // Two C blocks side by side hold M(r, c) = 1 + r + c / 32 (exact in bf16 for the lanes' values).
  for (int lane = 0; lane < 32; ++lane) {
    float lo[4], hi[4];
    for (int i = 0; i < 4; ++i) {
      const mma::Coord p = mma::c_coord(lane, i);
      lo[i] = 1.f + float(p.row) + float(p.col) / 32.f;
      hi[i] = 1.f + float(p.row) + float(p.col + 8) / 32.f;
    }
    uint32_t a[4];
    mma::pack_a_from_c(lo, hi, a);
    for (int i = 0; i < 8; ++i) {
      const mma::Coord p = mma::a_coord(lane, i);
      const float got = (i & 1) ? hi_of(a[i / 2]) : lo_of(a[i / 2]);
      CHECK(got == float(bf(1.0 + p.row + p.col / 32.0)));
      const mma::Coord src = mma::a_source_in_c(i);
      const mma::Coord c = mma::c_coord(lane, src.col);
      CHECK((c.row == p.row && c.col + 8 * src.row == p.col));
    }
  }
  // Rounding happens once, to nearest even: 1 + 2^-8 + 2^-10 rounds up, 1 + 2^-8 (a tie) to 1.
  const float x[4] = {1.f + 0x1p-8f + 0x1p-10f, 1.f + 0x1p-8f, 0.f, 0.f};
  uint32_t a[4];
  mma::pack_a_from_c(x, x, a);
  CHECK(lo_of(a[0]) == 1.f + 0x1p-7f);
  CHECK(hi_of(a[0]) == 1.f);
}

TEST_CASE("mma fragments: shared-memory fragment loads read the elements the layouts name") {
  const int cols = 64, ldw = mma::ld_words(cols);
  Vec m(64 * cols);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < cols; ++c) m[size_t(r * cols + c)] = bf(r * 0.5 + c * 0.0078125 - 3.0);
  const auto t = word_tile(m, 64, cols, 0);
  auto at = [&](int r, int c) { return float(m[size_t(r * cols + c)]); };
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t a[4], b[2], bt[2];
    mma::load_a(t.data() + 16 * ldw, ldw, 32, lane, a);         // rows 16.., cols 32..
    mma::load_b_nk(t.data() + 8 * ldw, ldw, 16, lane, b);       // B(k, n) = m(8 + n, 16 + k)
    mma::load_b_kn(t.data() + 32 * ldw, ldw, 40, lane, bt);     // B(k, n) = m(32 + k, 40 + n)
    for (int i = 0; i < 8; ++i) {
      const mma::Coord p = mma::a_coord(lane, i);
      CHECK(((i & 1) ? hi_of(a[i / 2]) : lo_of(a[i / 2])) == at(16 + p.row, 32 + p.col));
    }
    for (int i = 0; i < 4; ++i) {
      const mma::Coord p = mma::b_coord(lane, i);
      CHECK(((i & 1) ? hi_of(b[i / 2]) : lo_of(b[i / 2])) == at(8 + p.col, 16 + p.row));
      CHECK(((i & 1) ? hi_of(bt[i / 2]) : lo_of(bt[i / 2])) == at(32 + p.row, 40 + p.col));
    }
  }
  // Bank spread of one fragment register: the 32 lanes' words fall on 32 distinct banks.
  for (int cols2 : {64, 128}) {
    std::set<int> banks;
    for (int lane = 0; lane < 32; ++lane) {
      const mma::Coord p = mma::a_coord(lane, 0);
      banks.insert((p.row * mma::ld_words(cols2) + p.col / 2) % 32);
    }
    CHECK(banks.size() == 32);
  }
}

TEST_CASE("mma fragments: ldmatrix loads give every lane the registers of the per-element loads") {
  for (int cols : {32, 64, 128}) {
    const int ldw = mma::ld_words(cols);
    Vec m(64 * size_t(cols));
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < cols; ++c) m[size_t(r * cols + c)] = bf(r * 0.5 + c * 0.0078125 - 3.0);
    const auto t = word_tile(m, 64, cols, 0);
    // (row0, col0) offsets as the tiles use them: rows in steps of 8 or 16, columns in steps of 16.
    for (const auto& [row0, col0] : {std::pair{0, 0}, std::pair{16, cols - 16}, std::pair{40, 16 % cols}}) {
      uint32_t got_a[32][4], got_nk[32][4], got_kn[32][4];
      run_warp([&](int lane) {
        HostWarp::ldsm_x4(got_a[lane], mma::ldsm_address(t.data(), ldw, row0, col0, mma::ldsm_a_source(lane)));
        HostWarp::ldsm_x4(got_nk[lane], mma::ldsm_address(t.data(), ldw, row0, col0, mma::ldsm_b_nk_source(lane)));
        HostWarp::ldsm_x4_trans(got_kn[lane],
                                mma::ldsm_address(t.data(), ldw, row0, col0, mma::ldsm_b_kn_source(lane)));
      });
      for (int lane = 0; lane < 32; ++lane) {
        uint32_t a[4], nk0[2], nk1[2], kn0[2], kn1[2];
        mma::load_a(t.data() + row0 * ldw, ldw, col0, lane, a);
        mma::load_b_nk(t.data() + row0 * ldw, ldw, col0, lane, nk0);       // n-tile rows row0..+8
        mma::load_b_nk(t.data() + (row0 + 8) * ldw, ldw, col0, lane, nk1);  // rows row0+8..+16
        mma::load_b_kn(t.data() + row0 * ldw, ldw, col0, lane, kn0);       // columns col0..+8
        mma::load_b_kn(t.data() + row0 * ldw, ldw, col0 + 8, lane, kn1);   // columns col0+8..+16
        for (int r = 0; r < 4; ++r) CHECK(got_a[lane][r] == a[r]);
        CHECK((got_nk[lane][0] == nk0[0] && got_nk[lane][1] == nk0[1]));
        CHECK((got_nk[lane][2] == nk1[0] && got_nk[lane][3] == nk1[1]));
        CHECK((got_kn[lane][0] == kn0[0] && got_kn[lane][1] == kn0[1]));
        CHECK((got_kn[lane][2] == kn1[0] && got_kn[lane][3] == kn1[1]));
      }
    }
    // Each of an ldmatrix's 4 phases reads one matrix: its 8 rows x 4 words must fall on 32
    // distinct banks (the row stride's padding), for each of the three address rules.
    for (auto source : {mma::ldsm_a_source, mma::ldsm_b_nk_source, mma::ldsm_b_kn_source})
      for (int mat = 0; mat < 4; ++mat) {
        std::set<int> banks;
        for (int lane = 8 * mat; lane < 8 * mat + 8; ++lane) {
          const mma::Coord p = source(lane);
          for (int w = 0; w < 4; ++w) banks.insert((p.row * ldw + p.col / 2 + w) % 32);
        }
        CHECK(banks.size() == 32);
      }
  }
}

TEST_CASE("mma fragments: the emulated warp's products through the fragment loads equal a dense product") {
  hw::Rng rng(7);
  const int K = 32, N = 16;  // A 16 x 32 (row-major), B 32 x 16 given as rows of Bt (16 x 32) and of B
  Vec A(16 * K), Bt(N * K), B(K * N);
  for (auto& x : A) x = bf(rng.normal());
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) B[size_t(k * N + n)] = Bt[size_t(n * K + k)] = bf(rng.normal());
  const auto ta = word_tile(A, 16, K, 0, 16), tbt = word_tile(Bt, N, K, 0, N), tb = word_tile(B, K, N, 0, K);
  float abt[32][2][4] = {}, ab[32][2][4] = {};
  run_warp([&](int lane) {
    float c[2][4] = {}, d[2][4] = {};
    mma::gemm_abt<2, 2, HostWarp>(c, ta.data(), tbt.data(), mma::ld_words(K), lane);
    uint32_t af[2][4];
    mma::load_a(ta.data(), mma::ld_words(K), 0, lane, af[0]);
    mma::load_a(ta.data(), mma::ld_words(K), 16, lane, af[1]);
    mma::gemm_ab<2, 2, HostWarp>(d, af, tb.data(), mma::ld_words(N), lane);
    for (int n = 0; n < 2; ++n)
      for (int e = 0; e < 4; ++e) {
        abt[lane][n][e] = c[n][e];
        ab[lane][n][e] = d[n][e];
      }
  });
  for (int lane = 0; lane < 32; ++lane)
    for (int n = 0; n < 2; ++n)
      for (int e = 0; e < 4; ++e) {
        const mma::Coord p = mma::c_coord(lane, e);
        double ref = 0;
        for (int k = 0; k < K; ++k) ref += A[size_t(p.row * K + k)] * B[size_t(k * N + n * 8 + p.col)];
        CHECK(abt[lane][n][e] == Approx(ref).margin(1e-4));
        CHECK(ab[lane][n][e] == Approx(ref).margin(1e-4));
      }
}

// ---------------- (2) the attention tile routines against dense attention ----------------

struct Problem {
  int64_t T = 0;
  int HD = 64;
  KeyRule rule;
  float scale = 0;
  Vec q, k, v, dout;  // [T][HD], bf16 values
  // dense reference in double
  Vec out, lse, dq, dk, dv;
  // what the backward items read: the forward's out rounded to bf16 gives delta, lse as float
  std::vector<float> lse_f, delta_f;
};

bool visible(const Problem& p, int64_t i, int64_t j) { return i < p.T && j < p.T && hw::tiles::key_visible(p.rule, i, j); }

Problem make_problem(int64_t T, int HD, KeyRule rule, uint64_t seed) {
  Problem p;
  p.T = T;
  p.HD = HD;
  p.rule = rule;
  p.scale = 1.f / std::sqrt(float(HD));
  hw::Rng rng(seed);
  for (Vec* x : {&p.q, &p.k, &p.v, &p.dout}) {
    x->resize(size_t(T * HD));
    for (auto& e : *x) e = bf(rng.normal());
  }
  const size_t n = size_t(T * HD);
  p.out.assign(n, 0);
  p.dq.assign(n, 0);
  p.dk.assign(n, 0);
  p.dv.assign(n, 0);
  p.lse.assign(size_t(T), 0);
  p.lse_f.assign(size_t(T), 0);
  p.delta_f.assign(size_t(T), 0);
  std::vector<Vec> P(size_t(T), Vec(size_t(T), 0.0));
  for (int64_t i = 0; i < T; ++i) {
    double mx = -INFINITY;
    Vec s(size_t(T), -INFINITY);
    for (int64_t j = 0; j < T; ++j)
      if (visible(p, i, j)) {
        double d = 0;
        for (int c = 0; c < HD; ++c) d += p.q[size_t(i * HD + c)] * p.k[size_t(j * HD + c)];
        s[size_t(j)] = d * double(p.scale);
        mx = std::max(mx, s[size_t(j)]);
      }
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) sum += visible(p, i, j) ? std::exp(s[size_t(j)] - mx) : 0.0;
    p.lse[size_t(i)] = mx + std::log(sum);
    for (int64_t j = 0; j < T; ++j) P[size_t(i)][size_t(j)] = visible(p, i, j) ? std::exp(s[size_t(j)] - p.lse[size_t(i)]) : 0;
    for (int c = 0; c < HD; ++c) {
      double o = 0;
      for (int64_t j = 0; j < T; ++j) o += P[size_t(i)][size_t(j)] * p.v[size_t(j * HD + c)];
      p.out[size_t(i * HD + c)] = o;
    }
  }
  for (int64_t i = 0; i < T; ++i) {
    double delta = 0, delta_kernel = 0;
    for (int c = 0; c < HD; ++c) {
      delta += p.dout[size_t(i * HD + c)] * p.out[size_t(i * HD + c)];
      delta_kernel += p.dout[size_t(i * HD + c)] * bf(p.out[size_t(i * HD + c)]);
    }
    p.lse_f[size_t(i)] = float(p.lse[size_t(i)]);
    p.delta_f[size_t(i)] = float(delta_kernel);
    for (int64_t j = 0; j < T; ++j) {
      const double pr = P[size_t(i)][size_t(j)];
      if (pr == 0) continue;
      double dp = 0;
      for (int c = 0; c < HD; ++c) dp += p.dout[size_t(i * HD + c)] * p.v[size_t(j * HD + c)];
      const double ds = pr * (dp - delta) * double(p.scale);
      for (int c = 0; c < HD; ++c) {
        p.dq[size_t(i * HD + c)] += ds * p.k[size_t(j * HD + c)];
        p.dk[size_t(j * HD + c)] += ds * p.q[size_t(i * HD + c)];
        p.dv[size_t(j * HD + c)] += pr * p.dout[size_t(i * HD + c)];
      }
    }
  }
  return p;
}

// The error of one 16-row block (mma_emulation.hpp).
double block_err(const std::vector<float>& got, const Vec& ref, const Problem& p, int64_t r0) {
  return row_block_err(got, ref, p.T, p.HD, r0);
}

constexpr int kHalfCols = 32;  // each of a row block's two warps takes half of every 64-wide tile

// Forward of the 16 query rows [row0, row0 + 16) of query tile qt, in the kernel's order: the two
// warps of the row block (key halves 1 and 0) each walk the tile's key tiles; half 1 exports, half 0
// merges and stores. Returns O (16 x HD) and the rows' lse.
template <int HD>
std::pair<std::vector<float>, std::vector<float>> emulate_forward(const Problem& p, int qt, int rw) {
  const int ldw = mma::ld_words(HD), ldx = HD + 8;
  const int64_t i0 = int64_t(qt) * 64, i1 = std::min(p.T, i0 + 64), row0 = i0 + 16 * rw;
  const auto Q = word_tile(p.q, p.T, HD, i0);
  hw::tiles::TileRange rg[2];
  const int nr = hw::tiles::key_tile_ranges(p.rule, i0, i1, rg);
  std::vector<int32_t> kts;
  for (int t = 0; t < nr; ++t)
    for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) kts.push_back(kt);
  std::vector<std::vector<uint32_t>> K, V;
  for (int32_t kt : kts) {
    K.push_back(word_tile(p.k, p.T, HD, int64_t(kt) * 64));
    V.push_back(word_tile(p.v, p.T, HD, int64_t(kt) * 64));
  }
  std::vector<float> xo(size_t(16 * ldx)), xm(16), xl(16), out(size_t(16 * HD), NAN), lse(16, NAN);
  const int valid = int(std::min<int64_t>(16, p.T - row0));
  for (int half : {1, 0})
    run_warp([&](int lane) {
      mma::FwdRows<HD> st;
      mma::fwd_init(st);
      for (size_t t = 0; t < kts.size(); ++t) {
        const int64_t j0 = int64_t(kts[t]) * 64;
        if (j0 + kHalfCols * half >= p.T) continue;
        const mma::ScoreBlock sb{row0, j0 + kHalfCols * half, p.T, p.rule, hw::tiles::tile_needs_mask(p.rule, i0, j0, p.T),
                                 false};
        mma::fwd_tile<HD, kHalfCols, HostWarp>(st, Q.data() + 16 * rw * ldw, K[t].data() + kHalfCols * half * ldw,
                                               V[t].data() + kHalfCols * half * ldw, ldw, sb, p.scale, lane);
      }
      if (half == 1) {
        mma::fwd_export(st, xo.data(), ldx, xm.data(), xl.data(), lane);
      } else {
        mma::fwd_merge(st, xo.data(), ldx, xm.data(), xl.data(), lane);
        mma::fwd_store(st, out.data(), HD, lse.data(), valid, lane);
      }
    });
  return {out, lse};
}

// dQ of query rows [row0, row0 + 16) (the kBwdDq item's row block rw of query tile qt).
template <int HD>
std::vector<float> emulate_dq(const Problem& p, int qt, int rw) {
  const int ldw = mma::ld_words(HD), ldx = HD + 8;
  const int64_t i0 = int64_t(qt) * 64, i1 = std::min(p.T, i0 + 64), row0 = i0 + 16 * rw;
  const auto Q = word_tile(p.q, p.T, HD, i0), dO = word_tile(p.dout, p.T, HD, i0);
  float lse[16], delta[16];
  for (int r = 0; r < 16; ++r) {
    lse[r] = row0 + r < p.T ? p.lse_f[size_t(row0 + r)] : INFINITY;
    delta[r] = row0 + r < p.T ? p.delta_f[size_t(row0 + r)] : 0.f;
  }
  hw::tiles::TileRange rg[2];
  const int nr = hw::tiles::key_tile_ranges(p.rule, i0, i1, rg);
  std::vector<float> xo(size_t(16 * ldx)), dq(size_t(16 * HD), NAN);
  const int valid = int(std::min<int64_t>(16, p.T - row0));
  for (int half : {1, 0})
    run_warp([&](int lane) {
      mma::DqRows<HD> st;
      mma::dq_init(st, lse, delta, lane);
      for (int t = 0; t < nr; ++t)
        for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
          const int64_t j0 = int64_t(kt) * 64;
          if (j0 + kHalfCols * half >= p.T) continue;
          const auto K = word_tile(p.k, p.T, HD, j0), V = word_tile(p.v, p.T, HD, j0);
          const mma::ScoreBlock sb{row0, j0 + kHalfCols * half, p.T, p.rule,
                                   hw::tiles::tile_needs_mask(p.rule, i0, j0, p.T), false};
          mma::dq_tile<HD, kHalfCols, HostWarp>(st, Q.data() + 16 * rw * ldw, dO.data() + 16 * rw * ldw,
                                                K.data() + kHalfCols * half * ldw, V.data() + kHalfCols * half * ldw,
                                                ldw, sb, p.scale, lane);
        }
      if (half == 1) {
        mma::c_export(st.dq, xo.data(), ldx, lane);
      } else {
        mma::c_add(st.dq, xo.data(), ldx, lane);
        mma::c_store(st.dq, dq.data(), HD, valid, lane);
      }
    });
  return dq;
}

// dK and dV of key rows [krow0, krow0 + 16) (the kBwdDkv item's row block rw of key tile kt) over
// the query tiles that see the key tile; each warp takes half of every query tile.
template <int HD>
std::pair<std::vector<float>, std::vector<float>> emulate_dkv(const Problem& p, int kt, int rw) {
  const int ldw = mma::ld_words(HD), ldx = HD + 8;
  const int64_t j0 = int64_t(kt) * 64, j1 = std::min(p.T, j0 + 64), krow0 = j0 + 16 * rw;
  const auto K = word_tile(p.k, p.T, HD, j0), V = word_tile(p.v, p.T, HD, j0);
  const hw::tiles::TileRange qr = hw::tiles::query_tile_range(p.rule, j0, j1, p.T);
  std::vector<float> xk(size_t(16 * ldx)), xv(size_t(16 * ldx)), dk(size_t(16 * HD), NAN), dv(size_t(16 * HD), NAN);
  const int valid = int(std::min<int64_t>(16, p.T - krow0));
  for (int half : {1, 0})
    run_warp([&](int lane) {
      mma::DkvRows<HD> st;
      mma::dkv_init(st);
      for (int32_t qt = qr.lo; qt < qr.hi; ++qt) {
        const int64_t i0 = int64_t(qt) * 64;
        if (i0 + kHalfCols * half >= p.T) continue;
        const auto Q = word_tile(p.q, p.T, HD, i0), dO = word_tile(p.dout, p.T, HD, i0);
        float lse[64], delta[64];
        for (int r = 0; r < 64; ++r) {
          lse[r] = i0 + r < p.T ? p.lse_f[size_t(i0 + r)] : INFINITY;
          delta[r] = i0 + r < p.T ? p.delta_f[size_t(i0 + r)] : 0.f;
        }
        const mma::ScoreBlock sb{krow0, i0 + kHalfCols * half, p.T, p.rule,
                                 hw::tiles::tile_needs_mask(p.rule, i0, j0, p.T), true};
        mma::dkv_tile<HD, kHalfCols, HostWarp>(st, K.data() + 16 * rw * ldw, V.data() + 16 * rw * ldw,
                                               Q.data() + kHalfCols * half * ldw, dO.data() + kHalfCols * half * ldw,
                                               ldw, lse + kHalfCols * half, delta + kHalfCols * half, sb, p.scale,
                                               lane);
      }
      if (half == 1) {
        mma::c_export(st.dk, xk.data(), ldx, lane);
        mma::c_export(st.dv, xv.data(), ldx, lane);
      } else {
        mma::c_add(st.dk, xk.data(), ldx, lane);
        mma::c_add(st.dv, xv.data(), ldx, lane);
        mma::c_store(st.dk, dk.data(), HD, valid, lane);
        mma::c_store(st.dv, dv.data(), HD, valid, lane);
      }
    });
  return {dk, dv};
}

constexpr double kTol = 1e-2;

// Row blocks (tile, block within the tile) to check: the first, one past the first tile's
// diagonal, and the ragged last one.
template <int HD>
void check_problem(const Problem& p, const char* what) {
  const int64_t last_tile = (p.T - 1) / 64;
  const int last_rw = int(((p.T - 1) % 64) / 16);
  const std::vector<std::pair<int, int>> blocks = {{0, 0}, {0, 3}, {int(last_tile), last_rw}};
  for (const auto& [tile, rw] : blocks) {
    if (int64_t(tile) * 64 + 16 * rw >= p.T) continue;
    const int64_t r0 = int64_t(tile) * 64 + 16 * rw;
    INFO(what << " T " << p.T << " HD " << HD << " rows from " << r0);
    const auto [out, lse] = emulate_forward<HD>(p, tile, rw);
    CHECK(block_err(out, p.out, p, r0) <= kTol);
    double lse_err = 0, lse_scale = 0;
    for (int64_t r = r0; r < std::min(p.T, r0 + 16); ++r) {
      lse_err = hw::test::worse(lse_err, hw::test::abs_err(double(lse[size_t(r - r0)]), p.lse[size_t(r)]));
      lse_scale = hw::test::bigger_scale(lse_scale, p.lse[size_t(r)]);
    }
    CHECK(hw::test::ratio(lse_err, hw::test::bigger_scale(lse_scale, 1.0)) <= kTol);
    CHECK(block_err(emulate_dq<HD>(p, tile, rw), p.dq, p, r0) <= kTol);
    const auto [dk, dv] = emulate_dkv<HD>(p, tile, rw);
    CHECK(block_err(dk, p.dk, p, r0) <= kTol);
    CHECK(block_err(dv, p.dv, p, r0) <= kTol);
  }
}

TEST_CASE("mma attention tiles (emulated warps): forward and backward of 16-row blocks match dense attention") {
  const int64_t T = 100;  // two tiles, the second ragged (rows 64..99)
  check_problem<64>(make_problem(T, 64, KeyRule{0, T}, 11), "softmax");
  check_problem<64>(make_problem(T, 64, KeyRule{0, 40}, 12), "window:40");
  check_problem<64>(make_problem(T, 64, KeyRule{3, 50}, 13), "sink_window:3:50");
  check_problem<64>(make_problem(T, 64, KeyRule{0, 2}, 14), "window:2");
  check_problem<64>(make_problem(150, 64, KeyRule{5, 20}, 15), "sink_window:5:20 (sink and window tiles apart)");
  check_problem<128>(make_problem(70, 128, KeyRule{0, 70}, 16), "softmax");
  check_problem<64>(make_problem(1, 64, KeyRule{0, 1}, 17), "softmax T=1");
}

TEST_CASE("mma attention tiles (emulated warps): a wrong mask is caught (the check can fail)") {
  // The forward of a causal problem run with a window rule must disagree with the causal reference.
  Problem p = make_problem(100, 64, KeyRule{0, 100}, 21);
  Problem wrong = p;
  wrong.rule = KeyRule{0, 8};
  const auto [out, lse] = emulate_forward<64>(wrong, 1, 1);
  CHECK(block_err(out, p.out, p, 80) > kTol);
}

}  // namespace
