// OAL with a baseline kernel (method.kernel = performer | dijiang | taylorshift): bad values are
// one error naming the key; the planner converts the chosen layers to that kind with the same
// adapters; the converted model's forward (the kinds' prefix-state engines, float) equals each
// kind's dense definition written out here in double, and so does Table 2's dense evaluation
// (oal::baseline_outputs); in a run the kinds' learnable values train with the adapters.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/oal/baselines.hpp"
#include "headwise/methods/oal/config.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

nlohmann::json baseline_doc(const std::string& dir, const std::string& kernel) {
  nlohmann::json doc = test::tiny_run_doc(dir);
  doc["model"]["n_head"] = 4;
  doc["model"]["n_kv_head"] = 2;  // GQA: query heads 0, 1 read KV head 0
  doc["model"]["n_embd"] = 32;    // head_dim 8
  doc["model"]["pos"] = "rope";
  doc["train"]["steps"] = 4;
  doc["train"]["checkpoint_every"] = 0;
  doc["method"] = {{"name", "oal"}, {"layers", "1"}, {"kernel", kernel}, {"performer_features", 20}};
  return doc;
}

// kappa(q, k) of one baseline head straight from its definition (docs/head-plans.md).
double dense_kappa(const std::string& kind, const std::vector<double>& q, const std::vector<double>& k,
                   const HeadExtras& ex, int l, int h) {
  const int D = int(q.size());
  const double sc = 1.0 / std::pow(double(D), 0.25);
  if (kind == "taylorshift") {
    double qq = 0, kk = 0, qk = 0;
    for (int c = 0; c < D; ++c) {
      qq += q[size_t(c)] * q[size_t(c)];
      kk += k[size_t(c)] * k[size_t(c)];
      qk += q[size_t(c)] * k[size_t(c)];
    }
    const double s = ex.taylorshifts.at({l, h}).tau * qk / std::sqrt(qq * kk);
    return 1.0 + s + s * s / 2.0;
  }
  if (kind == "performer") {
    const PerformerHeadValues& p = ex.performers.at({l, h});
    double nq = 0, nk = 0;
    for (int c = 0; c < D; ++c) {
      nq += sc * sc * q[size_t(c)] * q[size_t(c)];
      nk += sc * sc * k[size_t(c)] * k[size_t(c)];
    }
    double kap = 0;
    for (int m = 0; m < p.n_features; ++m) {
      double wq = 0, wk = 0;
      for (int c = 0; c < D; ++c) {
        wq += p.W[size_t(m * D + c)] * sc * q[size_t(c)];
        wk += p.W[size_t(m * D + c)] * sc * k[size_t(c)];
      }
      kap += std::exp(wq - nq / 2) * std::exp(wk - nk / 2) / p.n_features;
    }
    return kap;
  }
  // dijiang: a(x) = softmax(C x / D^(1/4)), C_fd = sqrt((f ? 2 : 1) / D) cos(pi (d + 1/2) f / D)
  const std::vector<float>& lw = ex.dijiangs.at({l, h}).log_w;
  auto a = [&](const std::vector<double>& x) {
    std::vector<double> z(static_cast<size_t>(D));
    double sum = 0;
    for (int f = 0; f < D; ++f) {
      for (int c = 0; c < D; ++c)
        z[size_t(f)] += std::sqrt((f ? 2.0 : 1.0) / D) * std::cos(std::acos(-1.0) * (c + 0.5) * f / D) * sc * x[size_t(c)];
      sum += (z[size_t(f)] = std::exp(z[size_t(f)]));
    }
    for (double& e : z) e /= sum;
    return z;
  };
  const std::vector<double> aq = a(q), ak = a(k);
  double kap = 0;
  for (int f = 0; f < D; ++f) kap += std::exp(double(lw[size_t(f)])) * aq[size_t(f)] * ak[size_t(f)];
  return kap;
}

}  // namespace

TEST_CASE("oal method.kernel: bad values are one error naming the key", "[oal][baselines][config]") {
  const std::string dir = test::temp_dir("oal_base_config");
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(baseline_doc(dir, "hedgehog"))),
                    Catch::Contains("method.kernel is \"hedgehog\"; expected oal, performer, dijiang or taylorshift"));
  nlohmann::json doc = baseline_doc(dir, "performer");
  doc["method"]["performer_features"] = 0;
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(doc)), Catch::Contains("method.performer_features must be in 1.."));
  doc["method"]["performer_features"] = 20;
  doc["method"]["kernel"] = 3;
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(doc)), Catch::Contains("kernel"));
  const oal::OalConfig d = oal::OalConfig::from_json({{"name", "oal"}}, "method");
  CHECK(d.kernel == "oal");
  CHECK(d.performer_features == 250);
  CHECK(oal::OalConfig::from_json(d.to_json(), "method").to_json() == d.to_json());
}

TEST_CASE("oal with a baseline kernel converts to that kind and its forward is the kind's dense definition",
          "[oal][baselines][planner]") {
  for (const std::string kind : {"performer", "dijiang", "taylorshift"}) {
    INFO(kind);
    const std::string dir = test::temp_dir("oal_base_" + kind);
    const RunConfig cfg = RunConfig::from_json(baseline_doc(dir, kind));
    dist::LocalComm comm;
    Trainer tr(cfg, "", comm, make_planners(cfg));
    PlannerContext ctx{tr.model(), cfg, comm, 0};
    auto planners = make_planners(cfg);
    std::optional<PlanChange> change = planners[0]->act(ctx);
    REQUIRE(change.has_value());
    for (int h = 0; h < 4; ++h) {
      CHECK(change->plan.layers[0][size_t(h)].kind == attn::HeadKind::Softmax);
      CHECK(change->plan.layers[1][size_t(h)].str() == (kind == "performer" ? "performer:20" : kind));
    }
    REQUIRE(change->adapters.has_value());
    CHECK(change->adapters->rank == 8);
    CHECK(change->report["kernel"] == kind);
    // The paper's starting values: fixed features (one draw per head), weights 1, temperature 1.
    if (kind == "performer") {
      REQUIRE(change->extras.performers.size() == 4);
      CHECK(change->extras.performers.at({1, 0}).W.size() == 20 * 8);
      CHECK(change->extras.performers.at({1, 0}).W != change->extras.performers.at({1, 1}).W);
    } else if (kind == "dijiang") {
      REQUIRE(change->extras.dijiangs.size() == 4);
      CHECK(change->extras.dijiangs.at({1, 2}).log_w == std::vector<float>(8, 0.f));
    } else {
      REQUIRE(change->extras.taylorshifts.size() == 4);
      CHECK(change->extras.taylorshifts.at({1, 3}).tau == 1.f);
    }
    // Values away from the start, so the check sees them used.
    Rng rng(7);
    for (auto& [k, v] : change->extras.dijiangs)
      for (float& w : v.log_w) w = float(0.8 * rng.normal());
    for (auto& [k, v] : change->extras.taylorshifts) v.tau = float(1.5 + k.second);
    tr.install(*change);
    const HeadExtras ex = tr.model().head_extras();

    const int64_t B = 2, T = 16;
    std::vector<int32_t> x(size_t(B * T));
    for (auto& t : x) t = int32_t(rng.below(32));
    tr.model().forward(x.data(), nullptr, B, T);
    std::vector<float> qkv, out;
    tr.model().read_layer_qkv(1, qkv);
    tr.model().read_layer_attn_out(1, out);
    const auto& lay = tr.model().layouts()[1];
    const int64_t W = lay.qkv_width(), OW = lay.out_width();
    const int d = 8;
    double worst_model = 0, worst_table = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int h = 0; h < 4; ++h) {
        const float* rows = qkv.data() + b * T * W;
        const int g = lay.kv_head_of(h);
        const float *q = rows + lay.q_col(h), *k = rows + lay.k_col(g), *v = rows + lay.v_col(g);
        oal::BaselineHead bh = oal::baseline_head(oal::parse_kernel(kind, "k"), d, 20, 1, 1, h, 4);
        if (kind == "performer") bh.performer = ex.performers.at({1, h});
        if (kind == "dijiang") bh.dijiang = ex.dijiangs.at({1, h});
        if (kind == "taylorshift") bh.taylorshift = ex.taylorshifts.at({1, h});
        std::vector<double> table(size_t(T * d));
        oal::baseline_outputs({q, k, v, W, W, W, int(T), d}, bh, table.data());
        for (int i = 0; i < T; ++i) {
          std::vector<double> qi(q + i * W, q + i * W + d), y(size_t(d), 0.0);
          double z = 0;
          for (int j = 0; j <= i; ++j) {
            const double kap = dense_kappa(kind, qi, std::vector<double>(k + j * W, k + j * W + d), ex, 1, h);
            z += kap;
            for (int c = 0; c < d; ++c) y[size_t(c)] += kap * v[j * W + c];
          }
          for (int c = 0; c < d; ++c) {
            const double r = y[size_t(c)] / z;
            const double m = out[size_t((b * T + i) * OW + lay.out_col(h) + c)];
            worst_model = std::max(worst_model, std::fabs(m - r) / (1 + std::fabs(r)));
            worst_table = std::max(worst_table, std::fabs(table[size_t(i * d + c)] - r) / (1 + std::fabs(r)));
          }
        }
      }
    CHECK(worst_model < 2e-5);   // float prefix states vs the double definition
    CHECK(worst_table < 1e-12);  // Table 2's double evaluation
  }
}

TEST_CASE("oal with a baseline kernel in a run: the kind's learnable values train with the adapters",
          "[oal][baselines][planner]") {
  for (const std::string kind : {"dijiang", "taylorshift"}) {
    INFO(kind);
    const std::string dir = test::temp_dir("oal_base_run_" + kind);
    const RunConfig cfg = RunConfig::from_json(baseline_doc(dir, kind));
    dist::LocalComm comm;
    Trainer tr(cfg, dir + "/run", comm, make_planners(cfg));
    const nlohmann::json summary = tr.run();
    CHECK(std::isfinite(summary["val_loss"].get<double>()));
    const ModelConfig& mc = tr.model().config();
    CHECK(mc.head_plan.layers[1][0].str() == kind);
    CHECK(mc.head_plan.layers[0][0].kind == attn::HeadKind::Softmax);
    CHECK(mc.lora.rank == 8);
    const HeadExtras ex = tr.model().head_extras();
    if (kind == "dijiang") {
      double moved = 0;
      for (float w : ex.dijiangs.at({1, 0}).log_w) moved += std::fabs(w);
      CHECK(moved > 1e-4);
    } else {
      CHECK(std::fabs(ex.taylorshifts.at({1, 0}).tau - 1.f) > 1e-5);
    }
  }
}
