// CPU tests of the bf16 vector access the CUDA op kernels use (tiles/bf16_pack.hpp): which
// half of a 32-bit word holds which array element (checked against the bytes of a real bf16
// array), exact widening (against hand-computed constants), rounding on packing (against an
// independent round-to-nearest-even in double, plus ties, overflow, NaN) and the alignment
// test that picks the vector path.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "headwise/kernels/tiles/bf16_pack.hpp"
#include "headwise/kernels/tiles/ops_grid.hpp"

using namespace hw::tiles;

namespace {

// Round-to-nearest-even of a float to bf16 precision, by integer rounding in double: q =
// x / ulp is exact, std::nearbyint rounds ties to even in the default mode, and q * ulp is
// exact. Beyond the largest finite bf16 the result is infinity.
double rne_bf16_reference(float x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0f) return x;
  const int e = std::max(std::ilogb(static_cast<double>(x)), -126);
  const double ulp = std::ldexp(1.0, e - 7);
  const double r = std::nearbyint(static_cast<double>(x) / ulp) * ulp;
  const double max_bf16 = std::ldexp(255.0 / 128.0, 127);  // bits 0x7f7f
  return std::abs(r) > max_bf16 ? std::copysign(INFINITY, r) : r;
}

uint16_t bits_of(float x) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16); }

// The two bf16 a packed word holds, in memory order (element 0 at the lower address).
void word_to_bf16(uint32_t w, hw::bf16 (&out)[2]) {
  uint16_t halves[2];
  std::memcpy(halves, &w, sizeof(w));
  out[0].bits = halves[0];
  out[1].bits = halves[1];
}

}  // namespace

TEST_CASE("bf16 pack: the low half of a word is the element at the lower address") {
  // 1.0, -3.0, 0.125, +inf as bf16 bits, laid out as an array and reread as two words.
  const hw::bf16 arr[4] = {{0x3f80}, {0xc040}, {0x3e00}, {0x7f80}};
  uint32_t words[2];
  std::memcpy(words, arr, sizeof(arr));
  CHECK(bf16_word_lo(words[0]) == 1.0f);
  CHECK(bf16_word_hi(words[0]) == -3.0f);
  CHECK(bf16_word_lo(words[1]) == 0.125f);
  CHECK(bf16_word_hi(words[1]) == std::numeric_limits<float>::infinity());
  // Packing puts them back in the same order and bits.
  hw::bf16 back[2];
  word_to_bf16(bf16_word(1.0f, -3.0f), back);
  CHECK(back[0].bits == 0x3f80);
  CHECK(back[1].bits == 0xc040);
  word_to_bf16(bf16_word(0.125f, std::numeric_limits<float>::infinity()), back);
  CHECK(back[0].bits == 0x3e00);
  CHECK(back[1].bits == 0x7f80);
}

TEST_CASE("bf16 pack: widening keeps every bf16 exactly, sign and specials included") {
  for (uint32_t bits = 0; bits <= 0xffffU; bits++) {
    const uint32_t w = bits | (((bits * 7919U) & 0xffffU) << 16);  // another value in the high half
    const float lo = bf16_word_lo(w), hi = bf16_word_hi(w);
    const float want_lo = std::bit_cast<float>(bits << 16);
    const float want_hi = std::bit_cast<float>(((bits * 7919U) & 0xffffU) << 16);
    if (std::isnan(want_lo)) {
      if (!std::isnan(lo)) FAIL("bits " << bits << " lost NaN");
    } else if (std::bit_cast<uint32_t>(lo) != std::bit_cast<uint32_t>(want_lo)) {
      FAIL("low half of bits " << bits);
    }
    if (!std::isnan(want_hi) && std::bit_cast<uint32_t>(hi) != std::bit_cast<uint32_t>(want_hi))
      FAIL("high half of bits " << bits);
  }
}

TEST_CASE("bf16 pack: packing rounds each float to nearest even, once") {
  SECTION("exact cases: ties, just past ties, overflow, subnormals, signed zero") {
    const float one_tie = 1.0f + std::ldexp(1.0f, -8);      // halfway between 1 and 1 + 2^-7
    const float odd_tie = 1.0f + 3.0f * std::ldexp(1.0f, -8);  // halfway, the lower neighbour odd
    const float past_tie = std::nextafter(one_tie, 2.0f);
    const float max_finite = std::bit_cast<float>(0x7f7f0000U);
    const float below_overflow = std::bit_cast<float>(0x7f7f7fffU);
    const float overflow_tie = std::bit_cast<float>(0x7f7f8000U);  // rounds up (0x7f7f is odd): inf
    struct Case {
      float x;
      uint16_t want;
    };
    const Case cases[] = {{one_tie, 0x3f80},          {odd_tie, 0x3f82},
                          {past_tie, 0x3f81},         {-one_tie, 0xbf80},
                          {max_finite, 0x7f7f},       {below_overflow, 0x7f7f},
                          {overflow_tie, 0x7f80},     {std::numeric_limits<float>::max(), 0x7f80},
                          {-std::numeric_limits<float>::max(), 0xff80},
                          {std::numeric_limits<float>::denorm_min(), 0x0000},
                          {std::bit_cast<float>(0x00018000U), 0x0002},  // subnormal tie, odd lower: up
                          {-0.0f, 0x8000},            {std::numeric_limits<float>::infinity(), 0x7f80}};
    for (const Case& c : cases) {
      hw::bf16 out[2];
      word_to_bf16(bf16_word(c.x, -c.x), out);
      INFO("x bits " << std::bit_cast<uint32_t>(c.x));
      CHECK(out[0].bits == c.want);
      CHECK(out[1].bits == static_cast<uint16_t>(c.want ^ 0x8000U));  // -x: the same magnitude
    }
  }
  SECTION("NaN stays NaN, even when its payload is only in the dropped bits") {
    for (uint32_t nan_bits : {0x7fc00000U, 0x7f800001U, 0xff800001U, 0x7fffffffU}) {
      hw::bf16 out[2];
      word_to_bf16(bf16_word(std::bit_cast<float>(nan_bits), 1.0f), out);
      INFO("NaN bits " << nan_bits);
      CHECK(std::isnan(std::bit_cast<float>(static_cast<uint32_t>(out[0].bits) << 16)));
      CHECK((out[0].bits & 0x8000U) == ((nan_bits >> 16) & 0x8000U));  // sign kept
      CHECK(out[1].bits == 0x3f80);
    }
  }
  SECTION("random floats over many binades match the double reference") {
    std::mt19937 gen(2025);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int k = 0; k < 20000; k++) {
      const float x = std::bit_cast<float>(any_bits(gen));
      const float y = std::bit_cast<float>(any_bits(gen));
      if (std::isnan(x) || std::isnan(y)) continue;
      const uint32_t w = bf16_word(x, y);
      const double rx = rne_bf16_reference(x), ry = rne_bf16_reference(y);
      if (static_cast<double>(bf16_word_lo(w)) != rx || static_cast<double>(bf16_word_hi(w)) != ry)
        FAIL("x bits " << std::bit_cast<uint32_t>(x) << " y bits " << std::bit_cast<uint32_t>(y));
      // Round once: packing an already rounded value changes nothing.
      if (bf16_word(bf16_word_lo(w), bf16_word_hi(w)) != w) FAIL("not idempotent for w " << w);
    }
  }
}

TEST_CASE("bf16 pack: a row read as words plus a scalar tail sees every element once, in order") {
  // The kernels' access pattern: Vec4Split items of 4 elements (two words), then the tail.
  for (int64_t n : {int64_t{0}, int64_t{3}, int64_t{4}, int64_t{13}, int64_t{64}}) {
    std::vector<hw::bf16> row(static_cast<size_t>(n) + 4);  // +4: the buffer is never empty
    for (int64_t i = 0; i < n; i++) row[static_cast<size_t>(i)] = {bits_of(static_cast<float>(i) - 5.5f)};
    const Vec4Split split = vec4_split(n, vec4_aligned(row.data()));
    std::vector<float> seen;
    for (int64_t i4 = 0; i4 < split.vec_items; i4++) {
      uint32_t w[2];
      std::memcpy(w, row.data() + 4 * i4, sizeof(w));
      seen.insert(seen.end(), {bf16_word_lo(w[0]), bf16_word_hi(w[0]), bf16_word_lo(w[1]), bf16_word_hi(w[1])});
    }
    for (int64_t i = split.tail_begin; i < n; i++) seen.push_back(hw::to_float(row[static_cast<size_t>(i)]));
    REQUIRE(static_cast<int64_t>(seen.size()) == n);
    for (int64_t i = 0; i < n; i++) CHECK(seen[static_cast<size_t>(i)] == static_cast<float>(i) - 5.5f);
  }
}

TEST_CASE("bf16 pack: the vector path needs 8-byte alignment for bf16, 16 for float") {
  alignas(16) hw::bf16 b[16] = {};
  alignas(16) float f[8] = {};
  CHECK(vec4_aligned(b));
  CHECK_FALSE(vec4_aligned(b + 1));
  CHECK_FALSE(vec4_aligned(b + 2));
  CHECK_FALSE(vec4_aligned(b + 3));
  CHECK(vec4_aligned(b + 4));  // 8 bytes in: enough for 4 bf16
  CHECK(vec4_aligned(f));
  CHECK_FALSE(vec4_aligned(f + 2));  // 8 bytes in: not enough for a float4
  CHECK(vec4_aligned(f + 4));
  CHECK(vec4_aligned(static_cast<const hw::bf16*>(nullptr)));
  CHECK(vec4_aligned(static_cast<const float*>(nullptr)));
}
