// The SAF planner on a training run: calibration leaves training state alone, the selection is
// deterministic and follows the variance ranking and the KL gate, the installed static heads
// reproduce the dense fitted pattern, prune mode removes the heads, and data-parallel ranks agree.
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <numeric>

#include "data/seed_mix.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/saf/planner.hpp"
#include "headwise/train/trainer.hpp"
#include "methods/methods_test_util.hpp"
#include "methods/reference_attention.hpp"
#include "methods/reference_gpt.hpp"

using namespace hw;

namespace {

std::vector<unsigned char> bytes_of(const Arena& a) {
  const auto* p = static_cast<const unsigned char*>(a.base());
  return {p, p + a.bytes()};
}

std::vector<std::pair<int, int>> selected_of(const nlohmann::json& report) {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : report["selected"]) out.emplace_back(s[0].get<int>(), s[1].get<int>());
  return out;
}

// SAF's own configuration of a run whose method section is one SAF object.
saf::SafConfig saf_of(const RunConfig& cfg) { return saf::SafConfig::from_json(cfg.methods.at(0)); }
SafPlanner saf_planner(const RunConfig& cfg) { return SafPlanner(saf_of(cfg), cfg); }

PlanChange plan_on(Trainer& tr, const RunConfig& cfg) {
  SafPlanner p = saf_planner(cfg);
  PlannerContext ctx{tr.model(), cfg, tr.comm(), tr.state().step};
  return p.act(ctx).value();
}

RunConfig with_method(nlohmann::json doc, const nlohmann::json& method) {
  if (method.value("name", "") == "none") doc["method"] = nlohmann::json::object();
  for (auto it = method.begin(); it != method.end(); ++it) doc["method"][it.key()] = it.value();
  return RunConfig::from_json(doc);
}

// Calibration source the planner uses by default, for the reference computations.
saf::CalibSource calib_source(const RunConfig& cfg) {
  auto s = std::make_shared<data::CalibSampler>(cfg.data.calib, cfg.train.seq_len, saf_of(cfg).stream_seed(cfg));
  return [s](int64_t i, int32_t* x, int32_t* y) { s->fetch(i, x, y); };
}

}  // namespace

TEST_CASE("SAF fires at the configured update", "[saf][planner]") {
  const std::string dir = test::methods_dir("fire");
  auto doc = test::tiny_saf_doc(dir);
  doc["method"].erase("at_step");
  CHECK(saf_planner(RunConfig::from_json(doc)).fire_step() == 4);  // round(0.5 * 8)
  doc["method"]["at_fraction"] = 0.3;
  CHECK(saf_planner(RunConfig::from_json(doc)).fire_step() == 2);  // round(2.4)
  doc["method"]["at_step"] = 7;
  const auto planners = make_planners(RunConfig::from_json(doc));
  REQUIRE(planners.size() == 1);
  CHECK(planners[0]->name() == "saf");
  for (int64_t s = 0; s < 8; ++s) CHECK(planners[0]->acts_at(s) == (s == 7));
  CHECK_THROWS_WITH(saf_planner(with_method(doc, {{"at_step", 9}})), Catch::Contains("beyond the run's train.steps"));
  doc["method"] = {{"name", "none"}};
  CHECK(make_planners(RunConfig::from_json(doc)).empty());
}

TEST_CASE("a calibration length shorter than train.seq_len is an error naming both keys", "[saf][planner]") {
  const std::string dir = test::methods_dir("calib_len");
  const auto doc = test::tiny_saf_doc(dir);  // train.seq_len 16, block_size 24
  try {
    saf_planner(with_method(doc, {{"calib_seq_len", 12}}));
    FAIL("calib_seq_len 12 < train.seq_len 16 was accepted");
  } catch (const Error& err) {
    const std::string msg = err.what();
    CHECK(msg.find("method.calib_seq_len (12)") != std::string::npos);
    CHECK(msg.find("train.seq_len (16)") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // The same through the registry (what `headwise train` and `experiment` validate with).
  CHECK_THROWS_WITH(make_planners(with_method(doc, {{"calib_seq_len", 15}})), Catch::Contains("method.calib_seq_len (15)"));
  // Equal, longer (within block_size) and the default 0 (= train.seq_len) are valid.
  CHECK(saf_planner(with_method(doc, {{"calib_seq_len", 16}})).calib_seq_len() == 16);
  CHECK(saf_planner(with_method(doc, {{"calib_seq_len", 20}})).calib_seq_len() == 20);
  CHECK(saf_planner(with_method(doc, {{"calib_seq_len", 0}})).calib_seq_len() == 16);
  CHECK_THROWS_WITH(saf_planner(with_method(doc, {{"calib_seq_len", 25}})), Catch::Contains("model.block_size (24)"));
}

TEST_CASE("calibration leaves weights, optimizer state, gradients and data position untouched", "[saf][planner]") {
  const std::string dir = test::methods_dir("untouched");
  const auto doc = test::tiny_saf_doc(dir);
  dist::LocalComm comm;
  RunConfig plain = with_method(doc, {{"name", "none"}});
  Trainer tr(plain, "", comm);
  tr.run(3);
  const auto params = bytes_of(tr.model().params()), grads = bytes_of(tr.model().grads());
  const auto m = bytes_of(tr.optimizer().m()), v = bytes_of(tr.optimizer().v());
  const auto state = tr.state().to_json();
  for (const char* selector : {"variance", "kl", "random", "gate_taylor"})
    for (const char* pattern : {"mean", "gaussian", "dirichlet"}) {
      const RunConfig cfg = with_method(doc, {{"selector", selector}, {"pattern", pattern}});
      const PlanChange c = plan_on(tr, cfg);
      CHECK(c.plan.count(attn::HeadKind::Static) == 2);  // round(0.25 * 8)
      CHECK(bytes_of(tr.model().params()) == params);
      CHECK(bytes_of(tr.model().grads()) == grads);
      CHECK(bytes_of(tr.optimizer().m()) == m);
      CHECK(bytes_of(tr.optimizer().v()) == v);
      CHECK(tr.state().to_json() == state);
    }
  // Training continues exactly as if no calibration had happened.
  Trainer ref(plain, "", comm);
  ref.run(3);
  CHECK(tr.train_step() == ref.train_step());
}

TEST_CASE("variance selection is deterministic and takes the lowest-variance heads", "[saf][planner]") {
  const std::string dir = test::methods_dir("select");
  // The float64 capture: its scores are checked against a double reference to 1e-9 below
  // (the fp32 backend capture is checked against this path in tests/saf/test_backend_capture.cpp).
  const RunConfig cfg =
      with_method(test::tiny_saf_doc(dir), {{"ratio", 0.375}, {"max_kl", 100.0}, {"capture", "reference"}});
  dist::LocalComm comm;
  Trainer tr(cfg, "", comm);
  tr.run(4);
  const PlanChange a = plan_on(tr, cfg), b = plan_on(tr, cfg);
  CHECK(selected_of(a.report) == selected_of(b.report));
  REQUIRE(a.extras.statics.size() == 3);
  for (const auto& [key, v] : a.extras.statics) {
    CHECK(v.alpha == b.extras.statics.at(key).alpha);
    CHECK(v.rho == b.extras.statics.at(key).rho);
    CHECK(v.alpha.size() == 24);  // extended to block_size
  }
  // Reference ranking from naive attention matrices of the same calibration sequences, forwarded
  // in the planner's batches (train.micro_batch rows), so both see the same fp32 q and k and the
  // scores agree to double rounding on any BLAS (reference_attention.hpp).
  const auto var = test::reference_variances(tr.model(), calib_source(cfg), int(saf_of(cfg).calib_seqs), 16,
                                             int(cfg.train.micro_batch));
  std::vector<int> order(var.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return var[size_t(x)] < var[size_t(y)]; });
  std::vector<std::pair<int, int>> expect;
  for (int i = 0; i < 3; ++i) expect.emplace_back(order[size_t(i)] / 4, order[size_t(i)] % 4);
  CHECK(selected_of(a.report) == expect);
  for (const auto& h : a.report["heads"])
    CHECK(h["scores"]["variance"].get<double>() ==
          Approx(var[size_t(h["layer"].get<int>() * 4 + h["head"].get<int>())]).epsilon(1e-9));
}

TEST_CASE("the KL gate skips heads that fit badly and backfills in score order", "[saf][planner]") {
  const std::string dir = test::methods_dir("gate");
  const auto doc = test::tiny_saf_doc(dir);
  dist::LocalComm comm;
  Trainer tr(RunConfig::from_json(doc), "", comm);
  tr.run(4);
  // All heads tried: their variance and fit KL.
  const PlanChange all = plan_on(tr, with_method(doc, {{"ratio", 1.0}, {"max_kl", 100.0}}));
  std::vector<double> var(8), kl(8);
  for (const auto& h : all.report["heads"]) {
    const int flat = h["layer"].get<int>() * 4 + h["head"].get<int>();
    var[size_t(flat)] = h["scores"]["variance"].get<double>();
    kl[size_t(flat)] = h["fit_kl"].get<double>();
  }
  std::vector<double> sorted_kl = kl;
  std::sort(sorted_kl.begin(), sorted_kl.end());
  const double max_kl = sorted_kl[3];  // about half the heads pass
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return var[size_t(x)] < var[size_t(y)]; });
  std::vector<std::pair<int, int>> expect;
  std::vector<int> expect_skipped;
  for (int f : order) {
    if (expect.size() == 2) break;
    if (kl[size_t(f)] <= max_kl)
      expect.emplace_back(f / 4, f % 4);
    else
      expect_skipped.push_back(f);
  }
  REQUIRE(!expect_skipped.empty());  // the gate must matter for this test to mean anything
  const PlanChange g = plan_on(tr, with_method(doc, {{"ratio", 0.25}, {"max_kl", max_kl}}));
  CHECK(selected_of(g.report) == expect);
  for (const auto& h : g.report["heads"]) {
    const int flat = h["layer"].get<int>() * 4 + h["head"].get<int>();
    const bool skipped = std::find(expect_skipped.begin(), expect_skipped.end(), flat) != expect_skipped.end();
    CHECK(h["skipped"].get<bool>() == skipped);
    if (!h["fit_kl"].is_null()) CHECK(h["fit_kl"].get<double>() == Approx(kl[size_t(flat)]).epsilon(1e-12));
  }
  // A gate nobody passes: a shortfall, nothing replaced.
  const PlanChange none = plan_on(tr, with_method(doc, {{"max_kl", 1e-12}}));
  CHECK(none.report["shortfall"] == 2);
  CHECK(none.plan.all_softmax());
}

TEST_CASE("after replacement the loss equals the loss with the dense fitted pattern", "[saf][planner]") {
  const std::string dir = test::methods_dir("dense");
  const RunConfig cfg = with_method(test::tiny_saf_doc(dir), {{"ratio", 0.5}});
  dist::LocalComm comm;
  Trainer tr(cfg, "", comm);
  tr.run(4);
  const PlanChange c = plan_on(tr, cfg);
  tr.install(c);
  REQUIRE(tr.model().config().head_plan.count(attn::HeadKind::Static) == 4);
  std::map<std::pair<int, int>, test::Dense> dense;
  for (const auto& [key, v] : c.extras.statics) dense[key] = test::dense_static_pattern(v.alpha, v.rho, 16);
  data::TokenLoader val(cfg.data.val, 2, 16, false, 0);
  std::vector<int32_t> x(32), y(32);
  val.fetch(0, x.data(), y.data());
  const double got = tr.model().forward(x.data(), y.data(), 2, 16);
  const double ref = test::ReferenceGpt(tr.model()).loss(x, y, 2, 16, dense);
  CHECK(got == Approx(ref).epsilon(2e-6));
  // The fitted pattern is close to the target it was fitted to: a reported KL below the gate.
  for (const auto& [l, h] : selected_of(c.report))
    CHECK(c.report["heads"][size_t(l * 4 + h)]["fit_kl"].get<double>() <= saf_of(cfg).max_kl);
}

TEST_CASE("prune mode removes Q/K/V/O of the same heads", "[saf][planner]") {
  const std::string dir = test::methods_dir("prune");
  const auto doc = test::tiny_saf_doc(dir);
  const RunConfig freeze = RunConfig::from_json(doc), prune = with_method(doc, {{"mode", "prune"}});
  dist::LocalComm comm;
  Trainer tr(freeze, "", comm);
  tr.run(4);
  const auto heads = selected_of(plan_on(tr, freeze).report);
  const PlanChange p = plan_on(tr, prune);
  CHECK(selected_of(p.report) == heads);
  CHECK(p.extras.statics.empty());
  const int64_t before = tr.model().num_parameters();
  tr.install(p);
  const int64_t C = 32, hd = 8;
  // Per pruned head: Q, K, V columns of c_attn (weight and bias) and its c_proj rows.
  CHECK(before - tr.model().num_parameters() == int64_t(heads.size()) * (3 * (C * hd + hd) + hd * C));
  for (const auto& [l, h] : heads) {
    const auto& lay = tr.model().layouts()[size_t(l)];
    CHECK(lay.q_slot[size_t(h)] == -1);
    CHECK(lay.k_slot[size_t(h)] == -1);
    CHECK(lay.v_slot[size_t(h)] == -1);
    CHECK(lay.o_slot[size_t(h)] == -1);
  }
  data::TokenLoader val(prune.data.val, 2, 16, false, 0);
  std::vector<int32_t> x(32), y(32);
  val.fetch(1, x.data(), y.data());
  CHECK(tr.model().forward(x.data(), y.data(), 2, 16) ==
        Approx(test::ReferenceGpt(tr.model()).loss(x, y, 2, 16, {})).epsilon(2e-6));
}

TEST_CASE("every pattern gives finite static heads, and structured random is not gated", "[saf][planner]") {
  const std::string dir = test::methods_dir("patterns");
  const auto doc = test::tiny_saf_doc(dir);
  dist::LocalComm comm;
  Trainer tr(RunConfig::from_json(doc), "", comm);
  tr.run(4);
  for (const char* pattern : {"mean", "sharp_mean", "gaussian", "dirichlet", "structured_random"}) {
    const PlanChange c = plan_on(tr, with_method(doc, {{"pattern", pattern}, {"max_kl", 100.0}}));
    INFO(pattern);
    CHECK(c.extras.statics.size() == 2);
    for (const auto& [key, v] : c.extras.statics) {
      REQUIRE(v.alpha.size() == 24);  // model.block_size
      REQUIRE(v.rho.size() == 24);
      for (size_t i = 0; i < v.alpha.size(); ++i) REQUIRE((std::isfinite(v.alpha[i]) && std::isfinite(v.rho[i])));
      // Positions past the calibration length T = 16: alpha 0, rho its last fitted value.
      for (size_t i = 16; i < 24; ++i) {
        CHECK(v.alpha[i] == 0.0f);
        CHECK(v.rho[i] == v.rho[15]);
      }
    }
    CHECK(c.report["max_kl"].is_null() == (std::string(pattern) == "structured_random"));
    if (std::string(pattern) == "structured_random") {
      // A direct draw: the head's stream is Rng(s ^ (0xD1B54A32D192ED03 (flat + 1))) with s the
      // SafPattern stream of SAF's seed (train.seed + 1 = 6); alpha_0..15, then rho_0..15, N(0, 1).
      const uint64_t s = data::derive_seed(6, data::Stream::SafPattern, 0);
      for (const auto& [key, v] : c.extras.statics) {
        const int flat = key.first * 4 + key.second;
        Rng rng(s ^ (0xD1B54A32D192ED03ull * (uint64_t(flat) + 1)));
        for (size_t t = 0; t < 16; ++t) CHECK(v.alpha[t] == float(rng.normal()));
        for (size_t t = 0; t < 16; ++t) CHECK(v.rho[t] == float(rng.normal()));
      }
    } else {
      // Fitted patterns: every selected head passed the gate with its recorded fit KL.
      for (const auto& sel : c.report["selected"]) {
        bool found = false;
        for (const auto& h : c.report["heads"])
          if (h["layer"] == sel[0] && h["head"] == sel[1]) {
            found = true;
            CHECK(h["fit_kl"].is_number());  // the gate ran on it
          }
        CHECK(found);
      }
    }
  }
}

TEST_CASE("the intervention log records scores, selection, fit and timings", "[saf][planner]") {
  const std::string dir = test::methods_dir("report");
  const RunConfig cfg = with_method(test::tiny_saf_doc(dir), {{"selector", "kl"}});
  dist::LocalComm comm;
  Trainer tr(cfg, dir + "/run", comm, make_planners(cfg));
  const auto t0 = std::chrono::steady_clock::now();
  tr.run();
  const double run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto j = test::read_json(intervention_file(dir + "/run", 4, 0, "saf"));
  CHECK(j["step"] == 4);
  CHECK(j["selector"] == "kl");
  CHECK(j["mode"] == "freeze");
  CHECK(j["requested"] == 2);
  CHECK(j["calib_seqs"] == 6);
  // Timings: both phases took time, and together less than the whole run measured here.
  const double capture = j["capture_seconds"].get<double>(), fit = j["fit_seconds"].get<double>();
  CHECK(capture > 0.0);
  CHECK(fit > 0.0);
  CHECK(capture + fit < run_seconds);
  // The capture's two parts: forwards and the host's attention recomputation, within it.
  const double fwd = j["capture_forward_seconds"].get<double>(), host = j["capture_host_seconds"].get<double>();
  CHECK(fwd > 0.0);
  CHECK(host > 0.0);
  CHECK(fwd + host <= capture);
  REQUIRE(j["heads"].size() == 8);
  // The kl selector took the two lowest forward-KL scores (max_kl 5: every fit passes), ties
  // by flat index.
  std::vector<std::pair<double, int>> by_kl;
  for (const auto& h : j["heads"])
    by_kl.emplace_back(h["scores"]["kl"].get<double>(), h["layer"].get<int>() * 4 + h["head"].get<int>());
  std::sort(by_kl.begin(), by_kl.end());
  std::set<int> lowest = {by_kl[0].second, by_kl[1].second}, chosen;
  for (const auto& sel : j["selected"]) chosen.insert(sel[0].get<int>() * 4 + sel[1].get<int>());
  CHECK(chosen == lowest);
  int selected = 0;
  for (const auto& h : j["heads"]) {
    CHECK(h["scores"].contains("kl"));
    CHECK(h["scores"].contains("variance"));
    const bool sel = h["selected"].get<bool>();
    selected += sel;
    CHECK(j["head_plan"][h["layer"].get<size_t>()][h["head"].get<size_t>()] == (sel ? "static" : "softmax"));
    if (sel) CHECK(!h["fit_kl"].is_null());
  }
  CHECK(selected == 2);
  CHECK(tr.model().config().head_plan.count(attn::HeadKind::Static) == 2);
}

TEST_CASE("training through SAF is deterministic and resumable on both sides of it", "[saf][planner]") {
  // In fp32 and in bf16 mixed precision (calibration reads bf16 activations back, the plan change
  // rebuilds the bf16 weight copy).
  const std::string precision = GENERATE(std::string("fp32"), std::string("bf16"));
  INFO("precision " << precision);
  const std::string dir = test::methods_dir("resume_" + precision);
  auto doc = test::tiny_saf_doc(dir);
  doc["train"]["precision"] = precision;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  {
    Trainer a(cfg, dir + "/a", comm, make_planners(cfg));
    a.run();
    Trainer b(cfg, dir + "/b", comm, make_planners(cfg));
    b.run();
  }
  const auto la = test::losses_of(dir + "/a/metrics.jsonl");
  REQUIRE(la.size() == 8);
  CHECK(la == test::losses_of(dir + "/b/metrics.jsonl"));
  const auto sel = selected_of(test::read_json(intervention_file(dir + "/a", 4, 0, "saf")));
  {
    Trainer r(cfg, dir + "/after", comm, make_planners(cfg));
    r.resume(dir + "/a/checkpoints/step_6");
    CHECK(r.model().config().head_plan.count(attn::HeadKind::Static) == 2);
    r.run();
  }
  const auto after = test::losses_of(dir + "/after/metrics.jsonl");
  REQUIRE(after.size() == 2);
  CHECK(after[0] == la[6]);
  CHECK(after[1] == la[7]);
  {
    Trainer r(cfg, dir + "/before", comm, make_planners(cfg));
    r.resume(dir + "/a/checkpoints/step_2");
    r.run();
  }
  CHECK(selected_of(test::read_json(intervention_file(dir + "/before", 4, 0, "saf"))) == sel);
  const auto before = test::losses_of(dir + "/before/metrics.jsonl");
  REQUIRE(before.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(before[i] == la[i + 2]);
}

TEST_CASE("data-parallel ranks select and fit the same heads, and disagreement is an error", "[saf][planner][dist]") {
  const std::string dir = test::methods_dir("ranks");
  const auto doc = test::tiny_saf_doc(dir);
  const RunConfig cfg = RunConfig::from_json(doc);
  auto model_of = [&] {
    auto m = std::make_unique<Model<float>>(cfg.model, cpu_backend<float>());
    m->init_weights(9);
    return m;
  };
  dist::LocalComm local;
  auto m1 = model_of();
  PlannerContext c1{*m1, cfg, local, 4};
  const PlanChange single = saf_planner(cfg).act(c1).value();
  std::vector<PlanChange> got(2);
  test::run_ranks(2, [&](dist::Comm& comm) {
    auto m = model_of();
    PlannerContext ctx{*m, cfg, comm, 4};
    got[size_t(comm.rank())] = saf_planner(cfg).act(ctx).value();
  });
  CHECK(selected_of(got[0].report) == selected_of(single.report));
  CHECK(selected_of(got[1].report) == selected_of(single.report));
  for (const auto& [key, v] : got[0].extras.statics) {
    CHECK(v.alpha == got[1].extras.statics.at(key).alpha);
    for (size_t i = 0; i < v.alpha.size(); ++i)
      REQUIRE(v.alpha[i] == Approx(single.extras.statics.at(key).alpha[i]).margin(1e-5));
  }
  // Ranks configured differently end up with different selections: both must refuse.
  std::vector<std::string> errors(2);
  test::run_ranks(2, [&](dist::Comm& comm) {
    const RunConfig mine = comm.rank() == 0 ? cfg : with_method(doc, {{"ratio", 0.5}});
    auto m = model_of();
    PlannerContext ctx{*m, mine, comm, 4};
    try {
      saf_planner(mine).act(ctx);
    } catch (const Error& e) {
      errors[size_t(comm.rank())] = e.what();
    }
  });
  CHECK(errors[0].find("disagree") != std::string::npos);
  CHECK(errors[1].find("disagree") != std::string::npos);
}
