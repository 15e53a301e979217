// SAF's backend capture (method.capture = "backend"): each head's probabilities from the CPU
// backend's fp32 softmax tiles, moments in float64. Checked against a long-double softmax
// written here, and against the float64 reference capture on models with learned positions and
// with RoPE (statistics to fp32 rounding, the same heads selected).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "headwise/attention/softmax_probs.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/saf/calibration.hpp"
#include "headwise/methods/saf/planner.hpp"
#include "headwise/train/trainer.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

// Largest |a - b| / (rel * |b| + abs) over two equally long vectors: <= 1 means within tolerance.
double worst(const std::vector<double>& a, const std::vector<double>& b, double rel, double abs) {
  REQUIRE(a.size() == b.size());
  double w = 0.0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]) / (rel * std::abs(b[i]) + abs));
  return w;
}

}  // namespace

TEST_CASE("backend softmax probabilities equal a long-double causal softmax", "[saf][backend_capture]") {
  // T = 150: three query tiles of 64, the last ragged; q and k rows strided wider than D.
  const int T = 150, D = 16;
  const int64_t ld = 40;
  Rng rng(21);
  std::vector<float> q(size_t(T * ld)), k(size_t(T * ld));
  for (auto& x : q) x = float(1.5 * rng.normal());
  for (auto& x : k) x = float(1.5 * rng.normal());
  std::vector<float> P(size_t(T) * T, -1.f), S(size_t(T) * T, -1.f);
  attn::softmax_probabilities<float>(q.data(), k.data(), ld, T, D, S.data(), P.data());
  double worst_p = 0.0, worst_s = 0.0;
  for (int i = 0; i < T; ++i) {
    std::vector<long double> s(size_t(i + 1));
    long double mx = -1e300L, z = 0;
    for (int j = 0; j <= i; ++j) {
      long double d = 0;
      for (int c = 0; c < D; ++c) d += (long double)q[size_t(i * ld + c)] * k[size_t(j * ld + c)];
      s[size_t(j)] = d / std::sqrt((long double)D);
      mx = std::max(mx, s[size_t(j)]);
    }
    for (int j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - mx);
    for (int j = 0; j <= i; ++j) {
      const double p = double(std::exp(s[size_t(j)] - mx) / z);
      worst_p = std::max(worst_p, std::abs(P[size_t(i) * T + j] - p) / (1e-5 * p + 1e-9));
      worst_s = std::max(worst_s, std::abs(S[size_t(i) * T + j] - double(s[size_t(j)])) /
                                      (1e-5 * std::abs(double(s[size_t(j)])) + 1e-6));
    }
    for (int j = i + 1; j < T; ++j) {
      REQUIRE(P[size_t(i) * T + j] == 0.f);
      REQUIRE(S[size_t(i) * T + j] == 0.f);
    }
  }
  CHECK(worst_p <= 1.0);  // fp32: within 1e-5 relative (+ 1e-9 absolute) of the exact softmax
  CHECK(worst_s <= 1.0);
  CHECK_THROWS_WITH(attn::softmax_probabilities<float>(q.data(), k.data(), 8, T, D, nullptr, P.data()),
                    Catch::Contains("row stride"));
}

namespace {

constexpr int kT = 72;  // two query tiles (64 + 8): the ragged diagonal tile is exercised

std::unique_ptr<Model<float>> model_with(const std::string& pos, uint64_t seed) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 80;
  mc.vocab_size = 32;
  mc.pos = pos;
  mc.bias = pos != "rope";
  mc.init_std = 0.25;  // heads attend unevenly, so their statistics differ
  auto m = std::make_unique<Model<float>>(mc, cpu_backend<float>());
  m->init_weights(seed);
  return m;
}

saf::CalibSource random_source(uint64_t seed) {
  return [seed](int64_t i, int32_t* x, int32_t* y) {
    Rng r(seed * 1000003ull + uint64_t(i));
    for (int t = 0; t < kT; ++t) x[t] = int32_t(r.below(32));
    for (int t = 0; t < kT; ++t) y[t] = t + 1 < kT ? x[t + 1] : int32_t(r.below(32));
  };
}

}  // namespace

TEST_CASE("backend capture statistics equal the float64 reference capture, learned positions and RoPE",
          "[saf][backend_capture]") {
  for (const std::string pos : {"learned", "rope"}) {
    INFO("model.pos = " << pos);
    auto m = model_with(pos, pos == "rope" ? 7 : 3);
    const auto src = random_source(pos == "rope" ? 15 : 11);
    saf::CaptureOptions opt;
    opt.n_seqs = 5;
    opt.seq_len = kT;
    opt.batch = 2;  // a padded last batch
    opt.needs.cell_variance = opt.needs.logit_variance = opt.needs.kl = true;
    dist::LocalComm comm;
    opt.path = saf::CapturePath::Reference;
    const auto ref = saf::capture_layers(*m, src, opt, 0, 2, comm);
    opt.path = saf::CapturePath::Backend;
    saf::CaptureTimes times;
    const auto got = saf::capture_layers(*m, src, opt, 0, 2, comm, &times);
    CHECK(times.host_seconds > 0.0);
    REQUIRE(got.size() == 8);
    std::vector<double> var_ref;
    for (size_t h = 0; h < got.size(); ++h) {
      INFO("head " << h);
      REQUIRE(got[h].count() == 5);
      // Tolerances (fp32 q k^T, exp and row sum against float64): means of the probabilities and
      // logits within 1e-5 relative (+1e-8 / 1e-6 absolute for near-zero cells); per-cell M2
      // within 1e-5 relative of the head's largest cell M2 (a difference of near-equal samples
      // loses the fp32 digits the samples share); the scores within 1e-5 relative.
      CHECK(worst(got[h].mean_packed(), ref[h].mean_packed(), 1e-5, 1e-8) <= 1.0);
      CHECK(worst(got[h].logit_mean_packed(), ref[h].logit_mean_packed(), 1e-5, 1e-6) <= 1.0);
      const auto& cm = ref[h].cell_m2_packed();
      const double cm_max = *std::max_element(cm.begin(), cm.end());
      CHECK(worst(got[h].cell_m2_packed(), cm, 0.0, 1e-5 * cm_max) <= 1.0);
      const auto& lm = ref[h].logit_m2_packed();
      CHECK(worst(got[h].logit_m2_packed(), lm, 0.0, 1e-5 * *std::max_element(lm.begin(), lm.end())) <= 1.0);
      CHECK(got[h].variance_score() == Approx(ref[h].variance_score()).epsilon(1e-5));
      CHECK(got[h].kl_score() == Approx(ref[h].kl_score()).epsilon(1e-5));
      var_ref.push_back(ref[h].variance_score());
      // The paths really are different computations (fp32 vs float64): not bit-identical.
      if (h == 0) CHECK(got[h].mean_packed() != ref[h].mean_packed());
    }
    // Heads differ (a ranking of equal heads would test nothing).
    CHECK(*std::max_element(var_ref.begin(), var_ref.end()) > 1.2 * *std::min_element(var_ref.begin(), var_ref.end()));
  }
}

namespace {

std::vector<std::pair<int, int>> selected_of(const nlohmann::json& report) {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : report["selected"]) out.emplace_back(s[0].get<int>(), s[1].get<int>());
  return out;
}

}  // namespace

TEST_CASE("SAF selects the same heads with the backend and the reference capture", "[saf][backend_capture]") {
  for (const std::string pos : {"learned", "rope"}) {
    INFO("model.pos = " << pos);
    const std::string dir = test::methods_dir("backend_capture_" + pos);
    nlohmann::json doc = test::tiny_saf_doc(dir);
    doc["model"]["pos"] = pos;
    doc["method"]["ratio"] = 0.375;  // 3 of 8 heads
    doc["method"]["max_kl"] = 100.0;
    const RunConfig cfg = RunConfig::from_json(doc);
    dist::LocalComm comm;
    Trainer tr(cfg, "", comm);
    tr.run(4);
    auto plan_with = [&](const std::string& capture) {
      nlohmann::json method = cfg.methods.at(0);
      method["capture"] = capture;
      SafPlanner p(saf::SafConfig::from_json(method), cfg);
      PlannerContext ctx{tr.model(), cfg, tr.comm(), tr.state().step};
      return p.act(ctx).value();
    };
    const PlanChange b = plan_with("backend"), r = plan_with("reference");
    CHECK(b.report["capture"] == "backend");
    CHECK(r.report["capture"] == "reference");
    REQUIRE(selected_of(b.report).size() == 3);
    CHECK(selected_of(b.report) == selected_of(r.report));
    REQUIRE(b.report["heads"].size() == r.report["heads"].size());
    for (size_t i = 0; i < b.report["heads"].size(); ++i)
      CHECK(b.report["heads"][i]["scores"]["variance"].get<double>() ==
            Approx(r.report["heads"][i]["scores"]["variance"].get<double>()).epsilon(1e-5));
  }
}

TEST_CASE("method.capture: a bad value and the backend path on CUDA are one error naming the key",
          "[saf][backend_capture]") {
  nlohmann::json method = {{"name", "saf"}, {"capture", "gpu"}};
  CHECK_THROWS_WITH(saf::SafConfig::from_json(method), Catch::Contains("method.capture") && Catch::Contains("\"gpu\""));
  CHECK(saf::SafConfig::from_json({{"name", "saf"}}).capture == "backend");
  const std::string dir = test::methods_dir("backend_capture_cuda");
  nlohmann::json doc = test::tiny_saf_doc(dir);
  doc["train"]["device"] = "cuda";
  const RunConfig cfg = RunConfig::from_json(doc);
  CHECK_THROWS_WITH(SafPlanner(saf::SafConfig::from_json(cfg.methods.at(0)), cfg),
                    Catch::Contains("method.capture = \"backend\"") && Catch::Contains("CUDA backend"));
  nlohmann::json ref = cfg.methods.at(0);
  ref["capture"] = "reference";
  CHECK_NOTHROW(SafPlanner(saf::SafConfig::from_json(ref), cfg));
}

// add_attention (issue 55) folds each band of a head's softmax into the moments while it is in
// cache; it must accumulate what the separate softmax_probabilities + add_sample did, bit for
// bit, except the KL term (log p from the logits), which agrees to about 1e-7 per row.
TEST_CASE("add_attention accumulates what softmax_probabilities and add_sample accumulate", "[saf][backend_capture]") {
  const int T = 150, D = 16;  // three bands of 64, the last ragged
  const int64_t ld = 40;
  saf::StatsNeeds needs;
  needs.cell_variance = needs.logit_variance = needs.kl = true;
  saf::HeadStatsAccumulator fused(T, needs), separate(T, needs);
  std::vector<float> probs(size_t(T) * T), logits(size_t(T) * T);
  for (int sample = 0; sample < 3; ++sample) {
    Rng rng(40 + uint64_t(sample));
    std::vector<float> q(size_t(T * ld)), k(size_t(T * ld));
    for (auto& x : q) x = float(1.5 * rng.normal());
    for (auto& x : k) x = float(1.5 * rng.normal());
    fused.add_attention(q.data(), k.data(), ld, D);
    attn::softmax_probabilities<float>(q.data(), k.data(), ld, T, D, logits.data(), probs.data());
    separate.add_sample(probs.data(), logits.data());
  }
  CHECK(fused.count() == 3);
  CHECK(fused.mean_packed() == separate.mean_packed());
  CHECK(fused.cell_m2_packed() == separate.cell_m2_packed());
  CHECK(fused.logit_mean_packed() == separate.logit_mean_packed());
  CHECK(fused.logit_m2_packed() == separate.logit_m2_packed());
  CHECK(fused.m2_total() == separate.m2_total());
  CHECK(fused.neg_entropy_sum() == Approx(separate.neg_entropy_sum()).epsilon(1e-7));
  CHECK(fused.kl_score() == Approx(separate.kl_score()).epsilon(1e-5));
}
