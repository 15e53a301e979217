// CPU tests of the stochastic fp32 -> bf16 rounding used by the CUDA AdamW's bf16 copy
// (tiles/bf16_stochastic.hpp), against an independent round-to-nearest-even in double and
// exact expectations.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/bf16_stochastic.hpp"

using namespace hw::tiles;

namespace {

// The two bf16 neighbours of finite x (toward zero and away from zero), from its bits.
double toward_zero(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xffff0000U); }
double away_from_zero(float x) {
  const double lo = toward_zero(x);
  if (lo == static_cast<double>(x)) return lo;
  // One bf16 ulp of lo's binade, in double: exact and independent of the bit carry.
  const int e = std::ilogb(lo == 0.0 ? static_cast<double>(x) : lo);
  const double ulp = std::ldexp(1.0, std::max(e, -126) - 7);
  return lo + std::copysign(ulp, static_cast<double>(x));
}

// Round to nearest, ties to even, by comparing distances in double.
double rne_reference(float x) {
  const double lo = toward_zero(x), hi = away_from_zero(x), v = x;
  const double dlo = std::abs(v - lo), dhi = std::abs(v - hi);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  const uint32_t lo_bits = std::bit_cast<uint32_t>(static_cast<float>(lo)) >> 16;
  return (lo_bits & 1U) == 0 ? lo : hi;
}

std::vector<float> sample_floats(hw::Rng& rng, size_t n) {
  std::vector<float> xs;
  for (size_t i = 0; i < n; i++) {
    const double mag = std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.below(60)) - 30);
    xs.push_back(static_cast<float>(rng.uniform() < 0.5 ? -mag : mag));
  }
  // Subnormals, the largest finite values and exact bf16 values.
  xs.push_back(std::numeric_limits<float>::denorm_min() * 12345.0f);
  xs.push_back(-std::numeric_limits<float>::denorm_min() * 77.0f);
  xs.push_back(1.0f + 1.0f / 1024.0f);
  xs.push_back(0.1f);
  return xs;
}

}  // namespace

TEST_CASE("bf16 stochastic rounding leaves representable values exact for every random word") {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 3.0e38f, 1.0e-30f, 0.15625f, -65536.0f}) {
    const float xb = bf16_bits_to_float(static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16));
    for (uint32_t r : {0U, 1U, 0x7fffU, 0x8000U, 0xffffU, 0xdeadbeefU, 0xffffffffU}) {
      INFO("x=" << xb << " r=" << r);
      CHECK(std::bit_cast<uint32_t>(bf16_bits_to_float(bf16_bits_stochastic(xb, r))) ==
            std::bit_cast<uint32_t>(xb));
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(bf16_bits_to_float(bf16_bits_stochastic(inf, 0xffffU)) == inf);
  CHECK(bf16_bits_to_float(bf16_bits_stochastic(-inf, 0xffffU)) == -inf);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(bf16_bits_to_float(bf16_bits_stochastic(nan, 0xffffU))));
  // A NaN whose payload sits only in the dropped bits must not become infinity.
  const float low_nan = std::bit_cast<float>(0x7f800001U);
  CHECK(std::isnan(bf16_bits_to_float(bf16_bits_stochastic(low_nan, 0))));
  CHECK(std::isnan(bf16_bits_to_float(bf16_bits_stochastic(low_nan, 0xffffU))));
}

TEST_CASE("bf16 stochastic rounding gives one of the two neighbours with mean exactly x") {
  hw::Rng rng(901);
  for (float x : sample_floats(rng, 40)) {
    const double lo = toward_zero(x), hi = away_from_zero(x);
    // Over all 2^16 values of the random bits the expectation is exact: the average of the
    // rounded values (summed exactly in double: few distinct bf16 values) equals x.
    double sum = 0.0;
    for (uint32_t r = 0; r < 65536U; r++) {
      const double y = bf16_bits_to_float(bf16_bits_stochastic(x, r));
      REQUIRE((y == lo || y == hi));
      sum += y;
    }
    INFO("x=" << x);
    CHECK(sum / 65536.0 == static_cast<double>(x));
  }
}

TEST_CASE("bf16 stochastic rounding with midpoint random bits is round-to-nearest-even") {
  hw::Rng rng(902);
  std::vector<float> xs = sample_floats(rng, 2000);
  // Exact ties: half-way between bf16 neighbours, with even and odd lower neighbours.
  for (uint32_t hi16 : {0x3f80U, 0x3f81U, 0xbf80U, 0xbf81U, 0x0001U, 0x7f7eU})
    xs.push_back(std::bit_cast<float>((hi16 << 16) | 0x8000U));
  for (float x : xs) {
    const uint32_t kept_lsb = (std::bit_cast<uint32_t>(x) >> 16) & 1U;
    // Adding 0x7fff + lsb then truncating rounds half to even.
    const uint16_t bits = bf16_bits_stochastic(x, 0x7fffU + kept_lsb);
    INFO("x=" << x);
    CHECK(static_cast<double>(bf16_bits_to_float(bits)) == rne_reference(x));
  }
}

TEST_CASE("bf16 stochastic rounding driven by the counter hash is unbiased") {
  // x at a quarter and at 0.9 of the way between neighbours; the hash's random words for
  // consecutive indices must round up in those proportions (a binomial with 200000 draws:
  // the bound is over 7 standard deviations, and the draws are fixed by the seed).
  const float base = 1.5f;  // exactly representable
  const double ulp = std::ldexp(1.0, -7);
  for (double frac : {0.25, 0.9}) {
    const float x = static_cast<float>(base + frac * ulp);
    const double p = (static_cast<double>(x) - base) / ulp;
    for (uint32_t seed : {1U, 77U}) {
      const int64_t draws = 200000;
      int64_t ups = 0;
      for (int64_t i = 0; i < draws; i++)
        ups += bf16_bits_to_float(bf16_bits_stochastic(x, rounding_bits(seed, static_cast<uint64_t>(i)))) > base;
      const double sd = std::sqrt(draws * p * (1 - p));
      INFO("frac=" << frac << " seed=" << seed << " ups=" << ups);
      CHECK(std::abs(static_cast<double>(ups) - draws * p) < 7.0 * sd);
    }
  }
}

TEST_CASE("bf16 rounding bits are a per-element function of seed and index") {
  // Neighbouring indices get distinct words (a bijection of the low half), seeds differ,
  // and the upper index half matters.
  std::set<uint32_t> seen;
  for (uint64_t i = 0; i < 4096; i++) seen.insert(rounding_bits(5, i));
  CHECK(seen.size() == 4096);
  CHECK(rounding_bits(5, 17) == rounding_bits(5, 17));
  CHECK(rounding_bits(5, 17) != rounding_bits(6, 17));
  CHECK(rounding_bits(5, 17) != rounding_bits(5, 17 + (uint64_t{1} << 32)));
  // The low 16 bits (the ones the rounding uses) are spread evenly: each of 16 bins holds
  // close to 1/16 of 65536 consecutive indices.
  std::vector<int> bins(16, 0);
  for (uint64_t i = 0; i < 65536; i++) bins[(rounding_bits(9, i) & 0xffffU) >> 12]++;
  for (int b : bins) CHECK(std::abs(b - 4096) < 400);
}
