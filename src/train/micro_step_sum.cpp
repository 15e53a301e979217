#include "headwise/train/micro_step_sum.hpp"

#include "headwise/core/error.hpp"
#include "headwise/optim/adamw.hpp"

namespace hw {

namespace {
float* floats(Arena& a) { return static_cast<float*>(a.base()); }
int bits_needed(int64_t n) {  // bits of n (0 for 0)
  int b = 0;
  while (n > 0) {
    ++b;
    n >>= 1;
  }
  return b;
}
}  // namespace

MicroStepSum::MicroStepSum(const Backend<float>& ops, const Arena& grads, int64_t micro_steps)
    : ops_(ops), micro_steps_(micro_steps), floats_(int64_t(grads.bytes() / sizeof(float))) {
  check(micro_steps >= 1, "internal: an update needs at least one micro-step");
  // Before micro-step m the parked sums are the binary digits of m, and m <= micro_steps - 1.
  const int n = bits_needed(micro_steps - 1);
  for (int k = 0; k < n; ++k) levels_.push_back(arena_like(grads, "grad.partial." + std::to_string(k)));
}

void MicroStepSum::park(Arena& grads, int64_t m) {
  check(m >= 0 && m + 1 < micro_steps_, "internal: park() is for micro-steps before the last");
  check(int64_t(grads.bytes() / sizeof(float)) == floats_, "internal: the gradient block changed size");
  float* g = floats(grads);
  // Carry: the digits of m that are set hold sums as large as the new one's, lowest first.
  int k = 0;
  for (; (m >> k) & 1; ++k) ops_.accumulate(g, floats(*levels_[size_t(k)]), floats_);
  // Memory is touched only through the backend's ops (device memory on a GPU).
  float* slot = floats(*levels_[size_t(k)]);  // empty: digit k of m is clear
  ops_.fill_zero(slot, floats_);
  ops_.accumulate(slot, g, floats_);  // 0 + x == x: a copy
  ops_.fill_zero(g, floats_);
}

void MicroStepSum::finish(float* grads, int64_t begin, int64_t end) const {
  check(0 <= begin && begin <= end && end <= floats_, "internal: finish() range outside the gradient block");
  const int64_t m = micro_steps_ - 1;  // the last micro-step: the parked sums are the digits of m
  for (size_t k = 0; k < levels_.size(); ++k)
    if ((m >> k) & 1) ops_.accumulate(grads + begin, floats(*levels_[k]) + begin, end - begin);
}

}  // namespace hw
