#include "headwise/optim/adamw.hpp"

#include <algorithm>
#include <cmath>

#include "headwise/core/error.hpp"

namespace hw {

namespace {
constexpr const char* kShardTensor = "shard";

int64_t block_floats(const Arena& params) { return int64_t(params.bytes() / sizeof(float)); }

std::unique_ptr<Arena> shard_moment(int64_t floats, const std::string& role, Device device) {
  auto a = std::make_unique<Arena>(role, device);
  a->declare(kShardTensor, {floats});
  a->allocate();
  return a;
}

void check_shard(const Arena& params, BlockShard s) {
  check(0 <= s.begin && s.begin <= s.end && s.end <= block_floats(params),
        "AdamW: shard [" + std::to_string(s.begin) + ", " + std::to_string(s.end) + ") outside the parameter block of " +
            std::to_string(block_floats(params)) + " floats");
}
}  // namespace

std::unique_ptr<Arena> arena_like(const Arena& params, const std::string& role) {
  auto a = std::make_unique<Arena>(role, params.device());
  for (const auto& t : params.tensors()) a->declare(t->name, t->shape, t->dtype);
  a->allocate();
  return a;
}

AdamW::AdamW(const AdamWConfig& cfg, const Backend<float>& ops, const Arena& params)
    : cfg_(cfg),
      ops_(ops),
      shard_{0, block_floats(params)},
      m_(arena_like(params, "adam.m")),
      v_(arena_like(params, "adam.v")) {}

AdamW::AdamW(const AdamWConfig& cfg, const Backend<float>& ops, const Arena& params, BlockShard shard)
    : cfg_(cfg), ops_(ops), sharded_(true) {
  rebuild(params, shard);
}

std::pair<std::unique_ptr<Arena>, std::unique_ptr<Arena>> AdamW::rebuild(const Arena& params) {
  check(!sharded_, "AdamW: a sharded optimizer is rebuilt with its new shard");
  auto old_m = std::move(m_), old_v = std::move(v_);
  m_ = arena_like(params, "adam.m");
  v_ = arena_like(params, "adam.v");
  shard_ = {0, block_floats(params)};
  return {std::move(old_m), std::move(old_v)};
}

void AdamW::rebuild(const Arena& params, BlockShard shard) {
  check(sharded_, "AdamW: a full optimizer has no shard to rebuild");
  check_shard(params, shard);
  shard_ = shard;
  m_.reset();  // drop the old shard before allocating the new one
  v_.reset();
  m_ = shard_moment(shard.size(), "adam.m", params.device());
  v_ = shard_moment(shard.size(), "adam.v", params.device());
}

void AdamW::step(Arena& params, const Arena& grads, double lr, int64_t t) {
  check(!sharded_, "AdamW: a sharded optimizer updates its shard only (step_range)");
  step_range(params, grads, lr, t, 0, block_floats(params));
}

void AdamW::step_range(Arena& params, const Arena& grads, double lr, int64_t t, int64_t begin, int64_t end) {
  check(t >= 1, "AdamW step count starts at 1");
  if (sharded_ && (begin < shard_.begin || end > shard_.end))  // (no message built on the per-step path)
    fail("AdamW: range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside the owned shard [" +
         std::to_string(shard_.begin) + ", " + std::to_string(shard_.end) + ")");
  // Both modes run every range through the same backend op (only the pointers differ), so a
  // shard's results are bit-identical to the full optimizer's.
  AdamWStep st;
  st.beta1 = float(cfg_.beta1);
  st.beta2 = float(cfg_.beta2);
  st.eps = float(cfg_.eps);
  st.bc2_sqrt = float(std::sqrt(1.0 - std::pow(cfg_.beta2, double(t))));
  st.step_size = float(lr) / float(1.0 - std::pow(cfg_.beta1, double(t)));
  for (const auto& pt : params.tensors()) {
    const int64_t n = pt->numel();
    const int64_t offset = int64_t(params.offset_of(*pt) / sizeof(float));
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + n);
    if (lo >= hi) continue;
    float* m;
    float* v;
    if (sharded_) {  // the shard's float i is the block's float shard_.begin + i
      m = m_->get(kShardTensor).f32() + (lo - shard_.begin);
      v = v_->get(kShardTensor).f32() + (lo - shard_.begin);
    } else {
      m = m_->get(pt->name).f32() + (lo - offset);
      v = v_->get(pt->name).f32() + (lo - offset);
    }
    st.decay = pt->rank() >= 2 ? float(1.0 - lr * cfg_.weight_decay) : 1.0f;
    ops_.adamw_update(pt->f32() + (lo - offset), grads.find(pt->name)->f32() + (lo - offset), m, v, hi - lo, st);
  }
}

double grad_global_norm(const Backend<float>& ops, const Arena& grads) {
  return std::sqrt(ops.sum_squares(static_cast<const float*>(grads.base()), block_floats(grads)));
}

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef >= 1.0 ? 1.0f : float(coef);
}

void clip_grads(const Backend<float>& ops, Arena& grads, double norm, double max_norm) {
  const float c = clip_coefficient(norm, max_norm);
  if (c != 1.0f) ops.scale(static_cast<float*>(grads.base()), c, block_floats(grads));
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double ratio = std::min(1.0, double(step - warmup_steps) / double(decay_steps));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

}  // namespace hw
