#include "headwise/optim/adamw.hpp"

#include <cmath>

#include "headwise/core/error.hpp"

namespace hw {

namespace {
std::unique_ptr<Arena> moments_like(const Arena& params, const std::string& role) {
  auto a = std::make_unique<Arena>(role);
  for (const auto& t : params.tensors()) a->declare(t->name, t->shape, t->dtype);
  a->allocate();
  return a;
}
}  // namespace

AdamW::AdamW(const AdamWConfig& cfg, const Arena& params)
    : cfg_(cfg), m_(moments_like(params, "adam.m")), v_(moments_like(params, "adam.v")) {}

std::pair<std::unique_ptr<Arena>, std::unique_ptr<Arena>> AdamW::rebuild(const Arena& params) {
  auto old_m = std::move(m_), old_v = std::move(v_);
  m_ = moments_like(params, "adam.m");
  v_ = moments_like(params, "adam.v");
  return {std::move(old_m), std::move(old_v)};
}

void AdamW::step(Arena& params, const Arena& grads, double lr, int64_t t) {
  step_range(params, grads, lr, t, 0, int64_t(params.bytes() / sizeof(float)));
}

void AdamW::step_range(Arena& params, const Arena& grads, double lr, int64_t t, int64_t begin, int64_t end) {
  check(t >= 1, "AdamW step count starts at 1");
  const float b1 = float(cfg_.beta1), b2 = float(cfg_.beta2), eps = float(cfg_.eps);
  const float bc1 = float(1.0 - std::pow(cfg_.beta1, double(t)));
  const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(cfg_.beta2, double(t))));
  const float step_size = float(lr) / bc1;
  for (const auto& pt : params.tensors()) {
    const int64_t n = pt->numel();
    const int64_t offset = int64_t(params.offset_of(*pt) / sizeof(float));
    const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + n);
    if (lo < hi) {
      float* p = pt->f32();
      const float* g = grads.find(pt->name)->f32();
      float* m = m_->get(pt->name).f32();
      float* v = v_->get(pt->name).f32();
      const float decay = pt->rank() >= 2 ? float(1.0 - lr * cfg_.weight_decay) : 1.0f;
#pragma omp parallel for schedule(static)
      for (int64_t i = lo - offset; i < hi - offset; ++i) {
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
      }
    }
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
