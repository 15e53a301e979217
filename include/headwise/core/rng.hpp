#pragma once
// Deterministic random numbers with a state small enough to save in trainer.json.
// xoshiro256** seeded by splitmix64; normals by Box-Muller (both values used in order).
#include <array>
#include <cstdint>
#include <string>

namespace hw {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next_u64();
  double uniform();                       // [0, 1)
  uint64_t below(uint64_t n);             // [0, n), unbiased
  double normal();                        // N(0, 1)
  // State as text (for trainer.json) and back.
  std::string state() const;
  void set_state(const std::string& s);

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace hw
