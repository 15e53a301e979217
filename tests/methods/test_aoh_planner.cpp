// AoH as a planner: its keys (defaults, round trip, one error naming the key for bad input), and
// a tiny training run where it acts before the first update: the streaming KV heads chosen from
// the starting checkpoint's stored weights (computed here the long way) become sink_window, the
// layout is kept, training continues with finite losses and the final checkpoint has the plan.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/aoh/config.hpp"
#include "headwise/methods/aoh/heads.hpp"
#include "headwise/methods/aoh/planner.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/param_layout.hpp"
#include "headwise/train/trainer.hpp"
#include "methods/aoh_reference.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

// tiny_saf_doc's run with GQA (4 query heads, 2 KV heads) and an AoH method object.
nlohmann::json aoh_doc(const std::string& dir, const nlohmann::json& method) {
  nlohmann::json doc = test::tiny_saf_doc(dir);
  doc["model"]["n_kv_head"] = 2;
  doc["method"] = method;
  return doc;
}

std::vector<std::unique_ptr<Planner>> planners_of(const std::string& dir, const nlohmann::json& method) {
  return make_planners(RunConfig::from_json(aoh_doc(dir, method)));
}

// The message of the one hw::Error `fn` throws ("" if none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("AoH: method keys, defaults and schedule", "[aoh][config]") {
  const std::string dir = test::methods_dir("aoh_config");
  const auto p = planners_of(dir, {{"name", "aoh"}, {"sink", 4}, {"window", 8}});
  REQUIRE(p.size() == 1);
  CHECK(p[0]->name() == "aoh");
  const nlohmann::json c = p[0]->config();
  CHECK(c == nlohmann::json{{"name", "aoh"},       {"sparsity", 0.5}, {"sink", 4},          {"window", 8},
                            {"per_layer", false},  {"selection", "spectrum"}, {"seed", 0},
                            {"at_fraction", 0.0},  {"at_step", -1}});
  CHECK(aoh::AohConfig::from_json(c).to_json() == c);
  // Default schedule: before the first update; at_fraction and at_step as SAF's.
  for (int64_t s = 0; s <= 8; ++s) CHECK(p[0]->acts_at(s) == (s == 0));
  CHECK(planners_of(dir, {{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"at_fraction", 0.5}})[0]->acts_at(4));
  CHECK(planners_of(dir, {{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"at_step", 8}})[0]->acts_at(8));
  // The defaults S = 64, W = 256 (notes/methods.md) on a model whose block holds them.
  auto doc = aoh_doc(dir, {{"name", "aoh"}});
  doc["model"]["block_size"] = 320;
  const auto d = make_planners(RunConfig::from_json(doc));
  CHECK(d[0]->config()["sink"] == 64);
  CHECK(d[0]->config()["window"] == 256);
}

TEST_CASE("AoH: bad method input is one error naming the key", "[aoh][config]") {
  const std::string dir = test::methods_dir("aoh_bad");
  auto err = [&](const nlohmann::json& m) { return error_of([&] { planners_of(dir, m); }); };
  const std::string sparsity = err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"sparsity", 1.5}});
  CHECK_THAT(sparsity, Catch::Contains("method.sparsity must be in [0, 1]") && Catch::Contains("1.5"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"sparsity", -0.1}}), Catch::Contains("method.sparsity"));
  // block_size 24: the defaults 64 + 256 do not fit, nor do 20 + 5.
  const std::string fit = err({{"name", "aoh"}});
  CHECK_THAT(fit, Catch::Contains("method.sink + method.window") && Catch::Contains("model.block_size (24)"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 20}, {"window", 5}}), Catch::Contains("(20 + 5 = 25) exceed"));
  CHECK(err({{"name", "aoh"}, {"sink", 20}, {"window", 4}}).empty());  // exactly the block: allowed
  const std::string unknown = err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"ratio", 0.5}});
  CHECK_THAT(unknown, Catch::Contains("method.ratio") && Catch::Contains("not a key of method \"aoh\""));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 4}, {"window", 0}}), Catch::Contains("method.window must be >= 1"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", -1}, {"window", 4}}), Catch::Contains("method.sink must be >= 0"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"at_step", 9}}),
             Catch::Contains("method.at_step") && Catch::Contains("beyond the run's train.steps"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"per_layer", "yes"}}),
             Catch::Contains("method.per_layer"));
  CHECK_THAT(err({{"name", "aoh"}, {"sink", 4}, {"window", 8}, {"selection", "best"}}),
             Catch::Contains("method.selection must be \"spectrum\" or \"random\""));
  for (const auto& e : {sparsity, fit, unknown}) CHECK(e.find('\n') == std::string::npos);  // one line
}

TEST_CASE("AoH at step 0 of a run: streaming KV heads become sink_window, training continues", "[aoh][planner]") {
  const std::string dir = test::methods_dir("aoh_run");
  for (const bool per_layer : {false, true}) {
    INFO("per_layer " << per_layer);
    const nlohmann::json method = {{"name", "aoh"},   {"sparsity", 0.5}, {"sink", 2},
                                   {"window", 4},     {"at_step", 0},    {"per_layer", per_layer}};
    const RunConfig cfg = RunConfig::from_json(aoh_doc(dir, method));
    // The run starts from a checkpoint (a pretrained model in practice): AoH scores its weights.
    const std::string init = dir + "/init";
    {
      Model<float> m(cfg.model, cpu_backend<float>());
      m.init_weights(21);
      save_model_files(m, init);
    }
    ModelConfig mc = cfg.model;
    mc.validate();
    // Expected: the KV heads (2 per layer, 4 in all) with the highest min-over-query-heads
    // effective rank, from the stored weights by the full d_model SVD.
    const auto ref = test::aoh_ref::kv_reference_scores(init, mc);
    const auto streaming = test::aoh_ref::reference_streaming(ref, 0.5, per_layer);
    CHECK(streaming.size() == 2);
    if (per_layer)
      for (int l = 0; l < 2; ++l) CHECK(streaming.count({l, 0}) + streaming.count({l, 1}) == 1);
    attn::HeadPlan want = attn::HeadPlan::uniform(2, 4);
    for (const auto& [l, g] : streaming)
      for (int h = 2 * g; h < 2 * g + 2; ++h) want.layers[size_t(l)][size_t(h)] = attn::HeadSpec::parse("sink_window:2:4");

    const std::string out = dir + (per_layer ? "/run_per_layer" : "/run_global");
    dist::LocalComm comm;
    Trainer tr(cfg, out, comm, make_planners(cfg));
    tr.init_from(init);
    tr.run();
    CHECK(tr.model().config().head_plan == want);
    const auto losses = test::losses_of(out + "/metrics.jsonl");
    CHECK(losses.size() == 8);
    for (double l : losses) CHECK(std::isfinite(l));
    // The intervention record, before the first update, layout kept.
    const auto report = test::read_json(out + "/interventions/step_0.0.aoh.json");
    CHECK(report["layout_kept"] == true);
    CHECK(report["n_streaming_kv_heads"] == 2);
    CHECK(report["n_kv_heads_scored"] == 4);
    std::set<std::pair<int, int>> reported;
    for (const auto& p : report["streaming_kv_heads"]) reported.insert({p[0].get<int>(), p[1].get<int>()});
    CHECK(reported == streaming);
    // The final checkpoint has the plan and loads.
    const std::string last = out + "/checkpoints/step_8";
    CHECK(read_checkpoint_config(last).head_plan == want);
    auto loaded = load_model(last, cpu_backend<float>());
    CHECK(loaded->config().head_plan == want);
  }
}

TEST_CASE("aoh: scores a base frozen under fresh adapters as the plain model, refuses trained q/k adapters",
          "[aoh][lora]") {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_kv_head = 2;
  mc.n_embd = 32;
  mc.block_size = 16;
  mc.vocab_size = 32;
  mc.validate();
  Model<float> plain(mc, cpu_backend<float>());
  plain.init_weights(3);
  Model<float> adapted(mc, cpu_backend<float>());
  adapted.init_weights(3);
  LoraConfig l;
  l.rank = 2;
  l.freeze_base = true;  // c_attn becomes a buffer, as after OAL's conversion
  adapted.add_adapters(l, 5);
  const aoh::HeadScores a = aoh::score_model(plain), b = aoh::score_model(adapted);
  for (int layer = 0; layer < 2; ++layer)
    for (int h = 0; h < 4; ++h) CHECK(b.head(layer, h).effective_rank == a.head(layer, h).effective_rank);
  // A trained adapter (B != 0) on k of layer 1 changes W_K: one error naming it.
  Tensor& B = adapted.params().get(lora_b_name(1, LoraTarget::K));
  std::vector<float> v(size_t(B.numel()), 0.f);
  v[0] = 0.5f;
  write_device(adapted.ops(), B.f32(), v);
  const std::string e = error_of([&] { aoh::score_model(adapted); });
  CHECK(e.find("h.1.attn.k.lora_B") != std::string::npos);
  CHECK(e.find("merge") != std::string::npos);
}
