#include "headwise/core/rng.hpp"

#include <cmath>
#include <numbers>
#include <sstream>

#include "headwise/core/error.hpp"

namespace hw {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Rng::seed_with(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);
  has_spare_ = false;
  spare_ = 0.0;
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  check(n > 0, "Rng::below(0)");
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do u1 = uniform();
  while (u1 <= 0.0);
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * std::numbers::pi * u2);
}

std::string Rng::state() const {
  std::ostringstream os;
  os << s_[0] << ' ' << s_[1] << ' ' << s_[2] << ' ' << s_[3] << ' ' << (has_spare_ ? 1 : 0) << ' ';
  os.precision(17);
  os << std::hexfloat << spare_;
  return os.str();
}

void Rng::set_state(const std::string& s) {
  std::istringstream is(s);
  int spare_flag = 0;
  std::string spare_text;
  is >> s_[0] >> s_[1] >> s_[2] >> s_[3] >> spare_flag >> spare_text;
  check(!is.fail(), "malformed RNG state '" + s + "'");
  has_spare_ = spare_flag != 0;
  spare_ = std::strtod(spare_text.c_str(), nullptr);
}

}  // namespace hw
