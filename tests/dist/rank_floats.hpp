#pragma once
// Test data for sums across ranks: each rank's floats come from its own seed, so every rank can
// regenerate the others' data and form the naive sum over ranks independently of any collective.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "support/rel_err.hpp"

namespace hw::dist::test {

// Rank r's floats: random signs, mantissas and exponents over 2^-12..2^12, so that sums round.
inline std::vector<float> rank_floats(int rank, std::int64_t n, unsigned salt) {
  std::mt19937 gen(1000u * static_cast<unsigned>(rank) + salt);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = std::ldexp(mant(gen), expo(gen));
  return v;
}

// The sum over ranks added in rank order, in float.
inline std::vector<float> naive_sum(int world, std::int64_t n, unsigned salt) {
  std::vector<float> s(static_cast<std::size_t>(n), 0.0f);
  for (int r = 0; r < world; ++r) {
    const std::vector<float> v = rank_floats(r, n, salt);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] += v[i];
  }
  return s;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Largest |a - b| relative to max(|b|, 1e-3); a NaN or an infinity on either side (or a size
// mismatch) is an infinite difference.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return hw::test::max_elem_err(a, b, 1e-3);
}

}  // namespace hw::dist::test
