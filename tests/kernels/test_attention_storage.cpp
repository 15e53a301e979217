// CPU tests of the CUDA attention's activation access (tiles/attention_storage.hpp): the
// bf16 store rounds to the nearest bf16 (checked against both bf16 neighbours in double), the
// eight-element unpack reads the bytes of a real bf16 array in order, the vector slots cover a
// tile exactly once walking rows first, the alignment test, and the kernels' bf16 tile load
// (vector path emulated thread by thread from these pieces) against plain element reads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "headwise/kernels/tiles/attention_storage.hpp"

using namespace hw::tiles;

namespace {

// bf16 values as doubles: the candidate neighbours of finite x (truncation and one bf16 ulp
// further from zero), computed in double independently of the rounding code.
double truncated(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xffff0000U); }
double one_ulp_out(float x) {
  const double lo = truncated(x);
  const int e = std::ilogb(lo == 0.0 ? static_cast<double>(x) : lo);
  return lo + std::copysign(std::ldexp(1.0, std::max(e, -126) - 7), static_cast<double>(x));
}

// A strided [rows][stride] bf16 array of distinct values.
std::vector<hw::bf16> strided_bf16(int64_t rows, int64_t stride, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<hw::bf16> v(static_cast<size_t>(rows * stride));
  for (auto& x : v) x = hw::to_bf16(dist(gen));
  return v;
}

// The kernel's vector path of load_tile<R, HD>, one emulated thread step per vector:
// dst[r * ldd + c] = src[(r0 + r) * stride + c] widened, zero for rows >= rows_end.
template <int R, int HD>
void emulate_vector_load(std::vector<float>& dst, int ldd, const hw::bf16* src, int64_t stride, int64_t r0,
                         int64_t rows_end) {
  for (int e = 0; e < R * HD / kBf16PerVec; ++e) {
    const VecSlot s = vec_slot(e, HD, kBf16PerVec);
    const int64_t row = r0 + s.row;
    float x[8] = {};
    if (row < rows_end) {
      uint32_t w[4];
      std::memcpy(w, src + row * stride + s.col, sizeof(w));  // the uint4 the GPU reads
      unpack_bf16x8(w, x);
    }
    for (int k = 0; k < kBf16PerVec; ++k) dst[static_cast<size_t>(s.row * ldd + s.col + k)] = x[k];
  }
}

}  // namespace

TEST_CASE("attention storage: a bf16 store keeps the nearest bf16, a load widens exactly") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> expo(-30, 30);
  for (int n = 0; n < 20000; ++n) {
    const float x = (n % 2 ? -1.f : 1.f) * std::ldexp(mant(gen), expo(gen));
    hw::bf16 b;
    store_from_float(&b, x);
    const double got = load_as_float(&b);
    const double lo = truncated(x), hi = one_ulp_out(x);
    INFO("x = " << x);
    REQUIRE((got == lo || got == hi));
    const double d_got = std::fabs(got - x), d_other = std::fabs((got == lo ? hi : lo) - x);
    REQUIRE(d_got <= d_other);
    if (d_got == d_other && lo != hi) REQUIRE((b.bits & 1U) == 0);  // ties to even
  }
  // fp32 storage is the identity both ways.
  float f = 0.f;
  store_from_float(&f, 0.1f);
  CHECK(load_as_float(&f) == 0.1f);
  // An exact tie: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7; the even neighbour is 1.
  hw::bf16 t;
  store_from_float(&t, 1.f + std::ldexp(1.f, -8));
  CHECK(load_as_float(&t) == 1.f);
}

TEST_CASE("attention storage: eight bf16 unpack in memory order") {
  hw::bf16 v[8];
  const float vals[8] = {1.f, -2.f, 0.5f, 3.25f, -0.125f, 96.f, 1.f / 1024, -7.5f};  // exact in bf16
  for (int k = 0; k < 8; ++k) v[k] = hw::to_bf16(vals[k]);
  uint32_t w[4];
  std::memcpy(w, v, sizeof(w));
  float out[8];
  unpack_bf16x8(w, out);
  for (int k = 0; k < 8; ++k) CHECK(out[k] == vals[k]);
}

TEST_CASE("attention storage: vector slots cover a tile once, rows first") {
  for (int cols : {64, 128}) {
    const int rows = 64, per_row = cols / kBf16PerVec;
    std::vector<int> seen(static_cast<size_t>(rows * cols), 0);
    for (int v = 0; v < rows * per_row; ++v) {
      const VecSlot s = vec_slot(v, cols, kBf16PerVec);
      REQUIRE(s.row >= 0);
      REQUIRE(s.row < rows);
      REQUIRE(s.col % kBf16PerVec == 0);
      REQUIRE(s.col + kBf16PerVec <= cols);
      // consecutive vectors of a row are adjacent in memory (a warp reads one contiguous run)
      if (v % per_row != 0) {
        const VecSlot prev = vec_slot(v - 1, cols, kBf16PerVec);
        CHECK(prev.row == s.row);
        CHECK(prev.col + kBf16PerVec == s.col);
      }
      for (int k = 0; k < kBf16PerVec; ++k) ++seen[static_cast<size_t>(s.row * cols + s.col + k)];
    }
    for (int c : seen) REQUIRE(c == 1);
  }
}

TEST_CASE("attention storage: rows take the 16-byte path only when every row is aligned") {
  CHECK(rows_vec16_aligned(0x1000, 64, 2));
  CHECK(rows_vec16_aligned(0x1010, 8, 2));
  CHECK_FALSE(rows_vec16_aligned(0x1008, 64, 2));  // base off by 8 bytes
  CHECK_FALSE(rows_vec16_aligned(0x1000, 68, 2));  // rows 136 bytes apart
  CHECK_FALSE(rows_vec16_aligned(0x1002, 64, 2));
  CHECK(rows_vec16_aligned(0x1000, 4, 4));
  CHECK_FALSE(rows_vec16_aligned(0x1000, 6, 4));
}

TEST_CASE("attention storage: the bf16 vector tile load equals plain element reads") {
  // A qkv-like block: stride 5 * HD, the head's block at column 2 * HD, sequences of T rows;
  // tiles starting at several r0, the last one running past the sequence's end.
  for (int HD : {64, 128}) {
    const int64_t T = 100, stride = 5 * HD, col = 2 * HD;
    const auto a = strided_bf16(T + 64, stride, 11u + unsigned(HD));
    for (int64_t r0 : {int64_t(0), int64_t(64), int64_t(96)}) {
      const int ldd = HD + 1;
      std::vector<float> got(static_cast<size_t>(64 * ldd), NAN);
      const hw::bf16* src = a.data() + col;
      if (HD == 64) emulate_vector_load<64, 64>(got, ldd, src, stride, r0, T);
      else emulate_vector_load<64, 128>(got, ldd, src, stride, r0, T);
      for (int r = 0; r < 64; ++r)
        for (int c = 0; c < HD; ++c) {
          const int64_t row = r0 + r;
          const float want = row < T ? hw::to_float(a[static_cast<size_t>(row * stride + col + c)]) : 0.f;
          INFO("HD " << HD << " r0 " << r0 << " r " << r << " c " << c);
          REQUIRE(got[static_cast<size_t>(r * ldd + c)] == want);
        }
      // Padding columns of the shared tile are never written.
      for (int r = 0; r < 64; ++r) CHECK(std::isnan(got[static_cast<size_t>(r * ldd + HD)]));
    }
  }
}
