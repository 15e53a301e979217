// The TF32 tensor-core tile product of the linear heads (tiles/mma_tf32.hpp) on the CPU: fragment
// coordinates against facts written here by hand from the PTX ISA table (section 9.7.14.5.7,
// "Matrix Fragments for mma.m16n8k8", .tf32), tf32_round against explicit bit patterns of
// cvt.rna.tf32.f32, and the block product run as 8 emulated warps (mma_emulation.hpp) against a
// dense double product, on the linear heads' shapes and strides. A deliberately wrong register
// order must fail the same comparison, so the comparison can fail.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/mma_tf32.hpp"
#include "mma_emulation.hpp"
#include "support/rel_err.hpp"

namespace {

namespace mma = hw::tiles::mma;
using hw_test_mma::HostWarp;
using hw_test_mma::run_warp;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(uint32_t u) { return mma::tf32_bits_to_float(u); }

// ---------------- (a) coordinates ----------------

bool at(mma::Coord c, int row, int col) { return c.row == row && c.col == col; }

TEST_CASE("mma tf32: fragment coordinates match hand-derived PTX facts") {
  // A (16 x 8): lane 0 (group 0, tig 0): a0 (0,0), a1 (8,0), a2 (0,4), a3 (8,4).
  CHECK(at(mma::tf32_a_coord(0, 0), 0, 0));
  CHECK(at(mma::tf32_a_coord(0, 1), 8, 0));
  CHECK(at(mma::tf32_a_coord(0, 2), 0, 4));
  CHECK(at(mma::tf32_a_coord(0, 3), 8, 4));
  // lane 5 (group 1, tig 1): (1,1) (9,1) (1,5) (9,5).
  CHECK(at(mma::tf32_a_coord(5, 0), 1, 1));
  CHECK(at(mma::tf32_a_coord(5, 1), 9, 1));
  CHECK(at(mma::tf32_a_coord(5, 2), 1, 5));
  CHECK(at(mma::tf32_a_coord(5, 3), 9, 5));
  // lane 14 (group 3, tig 2): a1 (11,2), a2 (3,6); lane 31 (group 7, tig 3): a0 (7,3), a3 (15,7).
  CHECK(at(mma::tf32_a_coord(14, 1), 11, 2));
  CHECK(at(mma::tf32_a_coord(14, 2), 3, 6));
  CHECK(at(mma::tf32_a_coord(31, 0), 7, 3));
  CHECK(at(mma::tf32_a_coord(31, 3), 15, 7));
  // B (8 x 8, row = k, col = n): lane 5: b0 (1,1), b1 (5,1); lane 30 (group 7, tig 2): (2,7) (6,7);
  // lane 3 (group 0, tig 3): (3,0) (7,0).
  CHECK(at(mma::tf32_b_coord(5, 0), 1, 1));
  CHECK(at(mma::tf32_b_coord(5, 1), 5, 1));
  CHECK(at(mma::tf32_b_coord(30, 0), 2, 7));
  CHECK(at(mma::tf32_b_coord(30, 1), 6, 7));
  CHECK(at(mma::tf32_b_coord(3, 0), 3, 0));
  CHECK(at(mma::tf32_b_coord(3, 1), 7, 0));
  // C/D (16 x 8 fp32, shared with m16n8k16): lane 27 (group 6, tig 3): (6,6) (6,7) (14,6) (14,7).
  CHECK(at(mma::c_coord(27, 0), 6, 6));
  CHECK(at(mma::c_coord(27, 1), 6, 7));
  CHECK(at(mma::c_coord(27, 2), 14, 6));
  CHECK(at(mma::c_coord(27, 3), 14, 7));
}

template <int M, int N>
void check_acc_cover() {
  std::vector<int> hits(size_t(M * N), 0);
  for (int w = 0; w < mma::kTcWarps; ++w)
    for (int lane = 0; lane < 32; ++lane) {
      mma::TcAcc<M, N> acc;
      acc.zero();
      std::set<int> rows;
      acc.for_each(w, lane, [&](int r, int c, float& x) {
        REQUIRE((r >= 0 && r < M && c >= 0 && c < N));
        CHECK(x == 0.f);
        ++hits[size_t(r * N + c)];
        rows.insert(r);
      });
      CHECK(rows.size() == 2);  // one 16-row strip: the lane's rows g and g + 8 of it
    }
  for (int h : hits) CHECK(h == 1);
}

TEST_CASE("mma tf32: the 8 warps' accumulators cover every output element exactly once") {
  check_acc_cover<32, 64>();
  check_acc_cover<32, 32>();
  check_acc_cover<64, 32>();
  check_acc_cover<64, 64>();
  check_acc_cover<32, 128>();
}

// ---------------- (b) tf32_round ----------------

TEST_CASE("mma tf32: tf32_round is cvt.rna.tf32.f32 on explicit bit patterns") {
  auto r = [](uint32_t u) { return mma::tf32_round(float_of(u)); };
  CHECK(r(0x3f800000u) == 0x3f800000u);  // 1 exact
  CHECK(r(0x3f802000u) == 0x3f802000u);  // 1 + 2^-10 exact (last tf32 mantissa bit)
  CHECK(r(0x3f800fffu) == 0x3f800000u);  // below half an ulp: down
  CHECK(r(0x3f801000u) == 0x3f802000u);  // tie from an even mantissa: away from zero (RNE would stay)
  CHECK(r(0x3f803000u) == 0x3f804000u);  // tie from an odd mantissa: away from zero
  CHECK(r(0x3f801001u) == 0x3f802000u);  // above half: up
  CHECK(r(0xbf801000u) == 0xbf802000u);  // negative tie: away from zero (more negative)
  CHECK(r(0xbf800fffu) == 0xbf800000u);  // negative, below half: toward zero
  CHECK(r(0x3ffff000u) == 0x40000000u);  // tie at the top mantissa: carries into the exponent (2.0)
  CHECK(r(0x3fffffffu) == 0x40000000u);  // just below 2: 2
  CHECK(r(0x7f7fefffu) == 0x7f7fe000u);  // largest finite region, below half: stays finite
  CHECK(r(0x7f7ff000u) == 0x7f800000u);  // rounds past the largest tf32: inf
  CHECK(r(0x7f800000u) == 0x7f800000u);  // +inf
  CHECK(r(0xff800000u) == 0xff800000u);  // -inf
  CHECK(r(0x00000000u) == 0x00000000u);  // +0
  CHECK(r(0x80000000u) == 0x80000000u);  // -0
  CHECK(r(0x00001000u) == 0x00002000u);  // denormal tie: away from zero
  CHECK(r(0x00000fffu) == 0x00000000u);  // tiny denormal: to zero
  CHECK(r(0x80001000u) == 0x80002000u);  // negative denormal tie
  CHECK(r(0x007ff000u) == 0x00800000u);  // largest denormal region: carries into the smallest normal
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc01234u}) {
    const uint32_t got = r(nan);
    CHECK(std::isnan(float_of(got)));
    CHECK((got & 0x1fffu) == 0u);
    CHECK((got & 0x80000000u) == (nan & 0x80000000u));
  }
  // A broad sweep against the definition written another way: the nearest of the two tf32
  // neighbours by magnitude, ties to the larger magnitude.
  hw::Rng rng(11);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>((rng.uniform() - 0.5) * std::ldexp(1.0, int(rng.uniform() * 60) - 30));
    const uint32_t u = bits_of(x), lo = u & ~0x1fffu, hi = lo + 0x2000u;
    const double d = std::fabs(double(x)), dlo = std::fabs(double(float_of(lo))), dhi = std::fabs(double(float_of(hi)));
    const uint32_t want = (d - dlo < dhi - d) ? lo : hi;
    REQUIRE(mma::tf32_round(x) == want);
  }
}

// ---------------- (c) the block product ----------------

// A test policy that hands the warp's mma a permuted fragment (a planted layout bug).
struct SwapA12Warp {
  static void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    const uint32_t p[4] = {a[0], a[2], a[1], a[3]};
    HostWarp::mma_tf32(d, p, b);
  }
};
struct SwapB01Warp {
  static void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    const uint32_t p[2] = {b[1], b[0]};
    HostWarp::mma_tf32(d, a, p);
  }
};

struct Errors {
  double rounded = 0, unrounded = 0;  // max |got - ref| / (|c0| + sum_k |a| |b|)
  bool finite = true;
};

double tf32d(float x) { return double(float_of(mma::tf32_round(x))); }
double bf16d(float x) { return double(hw::to_float(hw::to_bf16(x))); }

// C = C0 + A B with the operands in NaN-filled buffers (every address not holding an element of
// A (m < M, k < K) or B (k < K, n < N) is NaN, including the ragged k step past K), run as the
// block's 8 warps with policy W. Errors.rounded compares with the operands rounded as precision P
// rounds them (tf32, or bf16 for kBf16). bf16_values: the operands are bf16 values to begin with.
template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS, class W = HostWarp,
          mma::TcPrecision P = mma::TcPrecision::kTf32>
Errors run_product(uint64_t seed, bool bf16_values = false) {
  constexpr int KP = (K + 15) / 16 * 16;  // k padded to whole steps: the span a broken kernel might read
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> A(size_t((M - 1) * ARS + (KP - 1) * ACS + 1), nan), B(size_t((KP - 1) * BRS + (N - 1) * BCS + 1), nan);
  hw::Rng rng(seed);
  auto val = [&] {  // full fp32 mantissas unless bf16_values: rounding matters
    const float x = static_cast<float>(rng.normal());
    return bf16_values ? float(bf16d(x)) : x;
  };
  auto rounded = [](float x) { return P == mma::TcPrecision::kBf16 ? bf16d(x) : tf32d(x); };
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) A[size_t(m * ARS + k * ACS)] = val();
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) B[size_t(k * BRS + n * BCS)] = val();
  std::vector<float> c0(size_t(M * N)), got(size_t(M * N), nan);
  for (auto& x : c0) x = val();

  for (int w = 0; w < mma::kTcWarps; ++w)
    run_warp([&](int lane) {
      mma::TcAcc<M, N> acc;
      acc.zero();
      acc.for_each(w, lane, [&](int r, int c, float& x) { x = c0[size_t(r * N + c)]; });
      mma::tc_tile_gemm_acc<M, N, K, ARS, ACS, BRS, BCS, W, P>(acc, A.data(), B.data(), w, lane);
      const mma::TcAcc<M, N>& cacc = acc;
      cacc.for_each(w, lane, [&](int r, int c, const float& x) { got[size_t(r * N + c)] = x; });
    });

  Errors e;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref_r = c0[size_t(m * N + n)], ref_u = ref_r, scale = std::fabs(ref_r);
      for (int k = 0; k < K; ++k) {
        const float a = A[size_t(m * ARS + k * ACS)], b = B[size_t(k * BRS + n * BCS)];
        ref_r += rounded(a) * rounded(b);
        ref_u += double(a) * double(b);
        scale += std::fabs(double(a) * double(b));
      }
      const double g = got[size_t(m * N + n)];
      if (!std::isfinite(g)) e.finite = false;
      e.rounded = hw::test::worse(e.rounded, hw::test::ratio(hw::test::abs_err(g, ref_r), scale));
      e.unrounded = hw::test::worse(e.unrounded, hw::test::ratio(hw::test::abs_err(g, ref_u), scale));
    }
  if (!e.finite) e.rounded = e.unrounded = INFINITY;
  return e;
}

template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
void check_product(uint64_t seed) {
  INFO("M " << M << " N " << N << " K " << K << " strides " << ARS << "," << ACS << " " << BRS << "," << BCS);
  const Errors e = run_product<M, N, K, ARS, ACS, BRS, BCS>(seed);
  CHECK(e.finite);
  CHECK(e.rounded < 1e-5);
  CHECK(e.unrounded < 2e-3);
  // tf32 rounding is visible (the operands have full fp32 mantissas), yet the rounded reference is
  // far closer: the kernel rounds, and does not compute in full fp32.
  CHECK(e.unrounded > 10 * e.rounded);
}

TEST_CASE("mma tf32: block products on the linear heads' shapes match a double reference") {
  // Row strides as the linear heads' shared tiles use them (odd, padded); ld's past K are NaN.
  check_product<32, 64, 64, 65, 1, 65, 1>(1);      // chunk x head_dim, row-major A
  check_product<32, 32, 64, 65, 1, 1, 65>(2);      // kernel matrix: B given as rows of B^T
  check_product<64, 32, 65, 1, 65, 33, 1>(3);      // transposed A (ARS = 1, ACS = ld), ragged K
  check_product<64, 64, 32, 33, 1, 65, 1>(4);
  check_product<32, 128, 32, 1, 33, 129, 1>(5);    // transposed A, wide N (4 tiles per warp)
  check_product<32, 32, 128, 129, 1, 33, 1>(6);    // long K
  check_product<32, 128, 33, 33, 1, 1, 33>(7);     // ragged K (one element in the last step), B^T rows
}

TEST_CASE("mma tf32: split operands (3xTF32) give fp32-level products") {
  // The unrounded double product is the reference now; single tf32 rounding misses it by ~1e-4.
  using mma::TcPrecision;
  const Errors one = run_product<64, 32, 65, 1, 65, 33, 1, HostWarp, TcPrecision::kTf32>(11);
  const Errors split = run_product<64, 32, 65, 1, 65, 33, 1, HostWarp, TcPrecision::kSplit3>(11);
  const Errors wide = run_product<32, 128, 33, 33, 1, 1, 33, HostWarp, TcPrecision::kSplit3>(12);
  REQUIRE(split.finite);
  REQUIRE(wide.finite);
  CHECK(split.unrounded < 1e-6);
  CHECK(wide.unrounded < 1e-6);
  CHECK(one.unrounded > 100 * split.unrounded);
}

TEST_CASE("mma tf32: bf16 operands (kBf16) on the m16n8k16 instruction") {
  using mma::TcPrecision;
  // dKappa's shape in the linear heads: V (C x D, row stride D + 1) times dO^T (rows of dO).
  const Errors full = run_product<32, 32, 64, 65, 1, 1, 65, HostWarp, TcPrecision::kBf16>(21);
  // one k in the last step:
  const Errors ragged = run_product<32, 32, 65, 65, 1, 1, 65, HostWarp, TcPrecision::kBf16>(22);
  const Errors wide = run_product<32, 128, 33, 33, 1, 1, 33, HostWarp, TcPrecision::kBf16>(23);
  for (const Errors& e : {full, ragged, wide}) {
    REQUIRE(e.finite);
    CHECK(e.rounded < 1e-6);               // exact products of the bf16-rounded operands, fp32 sums
    CHECK(e.unrounded > 10 * e.rounded);   // and bf16 rounding is what separates them from exact
  }
  // Operands that are bf16 values already lose nothing: the product is exact up to fp32 sums.
  const Errors exact = run_product<32, 32, 64, 65, 1, 1, 65, HostWarp, TcPrecision::kBf16>(24, true);
  REQUIRE(exact.finite);
  CHECK(exact.unrounded < 1e-6);
}

TEST_CASE("mma tf32: a wrong register order fails the same comparison") {
  const Errors good = run_product<32, 64, 64, 65, 1, 65, 1>(8);
  const Errors swap_a = run_product<32, 64, 64, 65, 1, 65, 1, SwapA12Warp>(8);
  const Errors swap_b = run_product<32, 64, 64, 65, 1, 65, 1, SwapB01Warp>(8);
  REQUIRE(good.rounded < 1e-5);
  CHECK(swap_a.rounded > 1e-2);
  CHECK(swap_b.rounded > 1e-2);
}

}  // namespace
