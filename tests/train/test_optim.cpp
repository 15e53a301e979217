// AdamW, clipping and the learning-rate schedule against independent formulas (PyTorch's
// documented algorithms written out in double).
#include <catch2/catch.hpp>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/optim/adamw.hpp"

using namespace hw;

TEST_CASE("AdamW follows torch.optim.AdamW, decaying only rank >= 2 tensors", "[optim]") {
  Arena params("p"), grads("g");
  params.declare("w", {3, 4});
  params.declare("b", {4});
  grads.declare("w", {3, 4});
  grads.declare("b", {4});
  params.allocate();
  grads.allocate();
  Rng rng(1);
  std::vector<double> p_ref[2], m_ref[2], v_ref[2];
  const char* names[2] = {"w", "b"};
  for (int k = 0; k < 2; ++k) {
    Tensor& t = params.get(names[k]);
    for (int64_t i = 0; i < t.numel(); ++i) {
      t.f32()[i] = float(rng.normal());
      p_ref[k].push_back(t.f32()[i]);
    }
    m_ref[k].assign(size_t(t.numel()), 0.0);
    v_ref[k].assign(size_t(t.numel()), 0.0);
  }
  const AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  AdamW opt(cfg, cpu_backend<float>(), params);
  for (int step = 1; step <= 5; ++step) {
    const double lr = 1e-2 * step;
    for (int k = 0; k < 2; ++k) {
      Tensor& g = grads.get(names[k]);
      for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] = float(rng.normal());
    }
    opt.step(params, grads, lr, step);
    for (int k = 0; k < 2; ++k) {
      const Tensor& g = grads.get(names[k]);
      const double wd = k == 0 ? 0.1 : 0.0;  // the bias vector is not decayed
      for (size_t i = 0; i < p_ref[k].size(); ++i) {
        const double gi = g.f32()[i];
        p_ref[k][i] *= 1.0 - lr * wd;
        m_ref[k][i] = 0.9 * m_ref[k][i] + 0.1 * gi;
        v_ref[k][i] = 0.95 * v_ref[k][i] + 0.05 * gi * gi;
        const double mhat = m_ref[k][i] / (1.0 - std::pow(0.9, step));
        const double vhat = v_ref[k][i] / (1.0 - std::pow(0.95, step));
        p_ref[k][i] -= lr * mhat / (std::sqrt(vhat) + 1e-8);
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    const Tensor& t = params.get(names[k]);
    for (size_t i = 0; i < p_ref[k].size(); ++i) CHECK(t.f32()[i] == Approx(p_ref[k][i]).epsilon(1e-5));
  }
}

TEST_CASE("gradient clipping follows clip_grad_norm_", "[optim]") {
  Arena grads("g");
  grads.declare("a", {2, 2});
  grads.declare("b", {3});
  grads.allocate();
  const float av[4] = {3, 0, 0, 4}, bv[3] = {0, 12, 0};
  std::copy(av, av + 4, grads.get("a").f32());
  std::copy(bv, bv + 3, grads.get("b").f32());
  const auto& ops = cpu_backend<float>();
  const double norm = grad_global_norm(ops, grads);
  CHECK(norm == Approx(13.0));
  clip_grads(ops, grads, norm, 1.0);
  const double coef = 1.0 / (13.0 + 1e-6);
  CHECK(grads.get("a").f32()[3] == Approx(4.0 * coef).epsilon(1e-6));
  CHECK(grads.get("b").f32()[1] == Approx(12.0 * coef).epsilon(1e-6));
  CHECK(grad_global_norm(ops, grads) == Approx(1.0).epsilon(1e-5));
  // Below the threshold nothing changes.
  clip_grads(ops, grads, grad_global_norm(ops, grads), 5.0);
  CHECK(grads.get("b").f32()[1] == Approx(12.0 * coef).epsilon(1e-6));
}

TEST_CASE("learning rate: linear warmup then cosine to min_lr", "[optim]") {
  const LrSchedule s{6e-4, 6e-5, 10, 110};
  CHECK(s.at(0) == Approx(6e-4 / 10));
  CHECK(s.at(9) == Approx(6e-4));
  CHECK(s.at(10) == Approx(6e-4));
  CHECK(s.at(60) == Approx(6e-5 + 0.5 * (6e-4 - 6e-5)));
  CHECK(s.at(110) == Approx(6e-5));
  const double r = 25.0 / 100.0;
  CHECK(s.at(35) == Approx(6e-5 + 0.5 * (1 + std::cos(M_PI * r)) * (6e-4 - 6e-5)));
}
