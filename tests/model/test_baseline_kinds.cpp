// The linearization baselines inside the model: their parameters' layout and gradients (finite
// differences in double through the whole model), checkpoint round trips, and the performer
// features' construction (orthogonal blocks, chi norms, the FAVOR+ estimate of exp(q.k/sqrt(D))).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"
#include "model/model_test_util.hpp"
#include "support/central_difference.hpp"
#include "support/temp_dir.hpp"

using namespace hw;

namespace {

ModelConfig baseline_config() {
  ModelConfig c = test::gradcheck_config(true);
  c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["performer:16", "dijiang", "taylorshift", "softmax"], ["linear", "taylorshift", "dijiang", "performer:8"]])"));
  return c;
}

HeadExtras baseline_extras(const ModelConfig& c, Rng& rng) {
  HeadExtras ex;
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head; ++h) {
      const auto kind = c.head_plan.layers[size_t(l)][size_t(h)].kind;
      if (kind == attn::HeadKind::DiJiang) {
        DiJiangHeadValues v = default_dijiang_values(c.head_dim());
        for (auto& x : v.log_w) x = float(0.5 * rng.normal());
        ex.dijiangs[{l, h}] = v;
      }
      if (kind == attn::HeadKind::TaylorShift) ex.taylorshifts[{l, h}].tau = float(1.5 + rng.normal());
    }
  return ex;
}

}  // namespace

TEST_CASE("baseline kinds: model layout, and whole-model gradients match finite differences", "[model][grad]") {
  const ModelConfig cfg = baseline_config();
  Rng rng(11);
  Model<double> m(cfg, cpu_backend<double>(), baseline_extras(cfg, rng));
  CHECK(m.buffers().get("h.0.attn.performer.0.W").shape == std::vector<int64_t>{16, 4});
  CHECK(m.buffers().get("h.1.attn.performer.3.W").shape == std::vector<int64_t>{8, 4});
  CHECK(m.params().find("h.0.attn.performer.0.W") == nullptr);  // fixed: no gradient
  CHECK(m.params().get("h.0.attn.dijiang.1.log_w").shape == std::vector<int64_t>{4});
  CHECK(m.params().get("h.1.attn.taylorshift.1.tau").shape == std::vector<int64_t>{1});
  const double tau_given = m.params().get("h.0.attn.taylorshift.2.tau").as<double>()[0];
  m.init_weights(3);
  CHECK(m.params().get("h.0.attn.taylorshift.2.tau").as<double>()[0] == tau_given);  // kept, not re-drawn
  for (const auto& t : m.params().tensors())
    for (int64_t i = 0; i < t->numel(); ++i) t->as<double>()[i] += 0.2 * rng.normal();
  const int64_t B = 2, T = 7;
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(11));
  for (auto& v : y) v = int32_t(rng.below(11));
  m.zero_grads();
  m.forward_backward(x.data(), y.data(), B, T, 1.0);
  int checked = 0;
  for (const auto& t : m.params().tensors()) {
    const bool baseline = t->name.find(".dijiang.") != std::string::npos || t->name.find(".taylorshift.") != std::string::npos;
    const Tensor& g = m.grads().get(t->name);
    for (int k = 0; k < (baseline ? int(t->numel()) : 3); ++k) {
      const int64_t i = baseline ? k : int64_t(rng.below(uint64_t(t->numel())));
      const double fd = test::check_entry_against_fd(t->name, i, g.as<double>()[i], t->as<double>()[i],
                                   [&] { return m.forward(x.data(), y.data(), B, T); });
      if (baseline) CHECK(std::abs(fd) > 1e-9);  // the parameter really reaches the loss
      ++checked;
    }
  }
  CHECK(checked > 40);
}

TEST_CASE("baseline kinds: a checkpoint round trip keeps features, weights and temperatures bit for bit") {
  const ModelConfig cfg = baseline_config();
  Rng rng(12);
  Model<float> m(cfg, cpu_backend<float>(), baseline_extras(cfg, rng));
  m.init_weights(5);
  const std::string dir = test::scratch_dir("baseline_kinds_ckpt");
  save_model_files(m, dir);
  auto back = load_model(dir, cpu_backend<float>());
  REQUIRE(back->config().head_plan == cfg.head_plan);
  for (const Arena* a : {&m.params(), &m.buffers()})
    for (const auto& t : a->tensors()) {
      if (t->name.find(".performer.") == std::string::npos && t->name.find(".dijiang.") == std::string::npos &&
          t->name.find(".taylorshift.") == std::string::npos)
        continue;
      const Tensor* u = a == &m.params() ? back->params().find(t->name) : back->buffers().find(t->name);
      REQUIRE(u != nullptr);
      INFO(t->name);
      CHECK(std::equal(t->f32(), t->f32() + t->numel(), u->f32()));
    }
  const HeadExtras ex = back->head_extras();
  CHECK(ex.performers.size() == 2);
  CHECK(ex.dijiangs.size() == 2);
  CHECK(ex.taylorshifts.size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("performer features: orthogonal blocks, chi norms, deterministic, unbiased kernel estimate") {
  const int D = 8;
  const PerformerHeadValues a = draw_performer_features(D, 20, 99), b = draw_performer_features(D, 20, 99);
  CHECK(a.W == b.W);
  CHECK(a.W != draw_performer_features(D, 20, 100).W);
  CHECK(default_performer_values(D, 20, 0, 1).W != default_performer_values(D, 20, 1, 0).W);
  REQUIRE(a.W.size() == 20u * D);
  auto row = [&](int m) { return &a.W[size_t(m * D)]; };
  std::vector<double> norms;
  for (int m = 0; m < 20; ++m) {
    double n2 = 0;
    for (int d = 0; d < D; ++d) n2 += double(row(m)[d]) * row(m)[d];
    norms.push_back(std::sqrt(n2));
    for (int o = (m / D) * D; o < m; ++o) {  // earlier rows of the same block
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(row(m)[d]) * row(o)[d];
      CHECK(std::abs(dot) <= 1e-5 * norms.back() * norms[size_t(o)]);
    }
  }
  CHECK(*std::max_element(norms.begin(), norms.end()) > *std::min_element(norms.begin(), norms.end()) + 0.1);
  // E[phi(q) . phi(k)] = exp(q . k / sqrt(D)): average the estimate over many independent draws
  std::vector<double> q = {0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.0, 0.3}, k = {0.1, 0.4, -0.3, 0.2, 0.2, -0.1, 0.5, 0.0};
  double qk = 0;
  for (int d = 0; d < D; ++d) qk += q[size_t(d)] * k[size_t(d)];
  const double sc = 1.0 / std::pow(double(D), 0.25);
  double qq = 0, kk = 0;
  for (int d = 0; d < D; ++d) qq += q[size_t(d)] * q[size_t(d)] * sc * sc, kk += k[size_t(d)] * k[size_t(d)] * sc * sc;
  double mean = 0;
  const int draws = 400, M = 64;
  for (int s = 0; s < draws; ++s) {
    const PerformerHeadValues v = draw_performer_features(D, M, 1000u + unsigned(s));
    double est = 0;
    for (int m = 0; m < M; ++m) {
      double wq = 0, wk = 0;
      for (int d = 0; d < D; ++d) wq += v.W[size_t(m * D + d)] * q[size_t(d)] * sc, wk += v.W[size_t(m * D + d)] * k[size_t(d)] * sc;
      est += std::exp(wq - qq / 2) * std::exp(wk - kk / 2) / M;
    }
    mean += est / draws;
  }
  CHECK(mean == Approx(std::exp(qk / std::sqrt(double(D)))).epsilon(0.01));
}
