#include "headwise/optim/adamw.hpp"

#include <algorithm>
#include <cmath>

#include "headwise/core/error.hpp"

namespace hw {

namespace {
constexpr const char* kShardTensor = "shard";

int64_t block_floats(const Arena& params) { return int64_t(params.bytes() / sizeof(float)); }

std::unique_ptr<Arena> shard_moment(int64_t floats, const std::string& role) {
  auto a = std::make_unique<Arena>(role);
  a->declare(kShardTensor, {floats});
  a->allocate();
  return a;
}

void check_shard(const Arena& params, BlockShard s) {
  check(0 <= s.begin && s.begin <= s.end && s.end <= block_floats(params),
        "AdamW: shard [" + std::to_string(s.begin) + ", " + std::to_string(s.end) + ") outside the parameter block of " +
            std::to_string(block_floats(params)) + " floats");
}

// The update of n consecutive floats. Both modes run exactly this loop (only the pointers
// differ), so a shard's results are bit-identical to the full optimizer's.
void update(float* p, const float* g, float* m, float* v, int64_t n, float decay, float b1, float b2, float eps,
            float bc2_sqrt, float step_size) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] -= step_size * (m[i] / denom);
  }
}
}  // namespace

std::unique_ptr<Arena> arena_like(const Arena& params, const std::string& role) {
  auto a = std::make_unique<Arena>(role);
  for (const auto& t : params.tensors()) a->declare(t->name, t->shape, t->dtype);
  a->allocate();
  return a;
}

AdamW::AdamW(const AdamWConfig& cfg, const Arena& params)
    : cfg_(cfg),
      shard_{0, block_floats(params)},
      m_(arena_like(params, "adam.m")),
      v_(arena_like(params, "adam.v")) {}

AdamW::AdamW(const AdamWConfig& cfg, const Arena& params, BlockShard shard) : cfg_(cfg), sharded_(true) {
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
  m_ = shard_moment(shard.size(), "adam.m");
  v_ = shard_moment(shard.size(), "adam.v");
}

void AdamW::step(Arena& params, const Arena& grads, double lr, int64_t t) {
  check(!sharded_, "AdamW: a sharded optimizer updates its shard only (step_range)");
  step_range(params, grads, lr, t, 0, block_floats(params));
}

void AdamW::step_range(Arena& params, const Arena& grads, double lr, int64_t t, int64_t begin, int64_t end) {
  check(t >= 1, "AdamW step count starts at 1");
  check(!sharded_ || (shard_.begin <= begin && end <= shard_.end),
        "AdamW: range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside the owned shard [" +
            std::to_string(shard_.begin) + ", " + std::to_string(shard_.end) + ")");
  const float b1 = float(cfg_.beta1), b2 = float(cfg_.beta2), eps = float(cfg_.eps);
  const float bc1 = float(1.0 - std::pow(cfg_.beta1, double(t)));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(cfg_.beta2, double(t))));
  const float step_size = float(lr) / bc1;
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
    const float decay = pt->rank() >= 2 ? float(1.0 - lr * cfg_.weight_decay) : 1.0f;
    update(pt->f32() + (lo - offset), grads.find(pt->name)->f32() + (lo - offset), m, v, hi - lo, decay, b1, b2, eps,
           bc2_sqrt, step_size);
  }
}

double grad_global_norm(const Arena& grads) {
  double total = 0.0;
  for (const auto& t : grads.tensors()) {
    const float* g = t->f32();
    const int64_t n = t->numel();
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += double(g[i]) * double(g[i]);
    total += s;
  }
  return std::sqrt(total);
}

void clip_grads(Arena& grads, double norm, double max_norm) {
  if (max_norm <= 0.0) return;
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  const float c = float(coef);
  for (const auto& t : grads.tensors()) {
    float* g = t->f32();
    const int64_t n = t->numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] *= c;
  }
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double ratio = std::min(1.0, double(step - warmup_steps) / double(decay_steps));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

}  // namespace hw
