// End-to-end: `headwise heads` (AoH scores from a checkpoint's weights) and `headwise convert`
// (a data-free method on a finished checkpoint), against the scores computed here the long way
// from the checkpoint's stored weights; bad input is one error line naming the key.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "methods/aoh_reference.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// A GQA checkpoint (2 layers, 4 query heads in 2 KV groups) whose plan has a static head.
ModelConfig tiny_config(bool all_softmax = false) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_kv_head = 2;
  mc.n_embd = 32;
  mc.block_size = 24;
  mc.vocab_size = 32;
  mc.head_plan = attn::HeadPlan::from_json(
      nlohmann::json::parse(R"([["softmax", "softmax", "softmax", "softmax"], ["static", "softmax", "softmax", "softmax"]])"));
  if (all_softmax) mc.head_plan = attn::HeadPlan::uniform(2, 4);
  mc.validate();
  return mc;
}

std::string make_checkpoint(const std::string& dir, bool all_softmax = false) {
  const ModelConfig mc = tiny_config(all_softmax);
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(5);
  const std::string path = dir + (all_softmax ? "/ckpt_softmax" : "/ckpt");
  save_model_files(m, path);
  return path;
}

using test::expect_one_error;

std::set<std::pair<int, int>> streaming_in(const nlohmann::json& j) {
  std::set<std::pair<int, int>> out;
  for (const auto& layer : j["layers"])
    for (const auto& k : layer["kv_heads"])
      if (k["class"] == "streaming") out.insert({layer["layer"].get<int>(), k["kv_head"].get<int>()});
  return out;
}

// The plan `streaming` implies on tiny_config's plan.
attn::HeadPlan implied_plan(const std::set<std::pair<int, int>>& streaming, const std::string& spec) {
  attn::HeadPlan p = tiny_config().head_plan;
  for (const auto& [l, g] : streaming)
    for (int h = 2 * g; h < 2 * g + 2; ++h)
      if (p.layers[size_t(l)][size_t(h)].softmax_family()) p.layers[size_t(l)][size_t(h)] = attn::HeadSpec::parse(spec);
  return p;
}

}  // namespace

TEST_CASE("heads scores a checkpoint from its weights and splits KV heads", "[cli][aoh]") {
  const std::string dir = test::cli_temp_dir("aoh_heads");
  const std::string ckpt = make_checkpoint(dir);
  const ModelConfig mc = tiny_config();
  const auto ref = test::aoh_ref::kv_reference_scores(ckpt, mc);
  for (const bool per_layer : {false, true}) {
    INFO("per_layer " << per_layer);
    const std::string json = dir + (per_layer ? "/per_layer.json" : "/global.json");
    auto r = test::run_headwise("heads --checkpoint " + ckpt + " --sparsity 0.5 --sink 2 --window 4 --json " + json +
                                (per_layer ? " --per-layer" : ""));
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("layer 1") != std::string::npos);  // the table
    const auto j = nlohmann::json::parse(std::ifstream(json));
    // Spectra and scores against the full d_model SVD of the stored weights.
    for (int l = 0; l < mc.n_layer; ++l) {
      const auto stored = test::aoh_ref::read_stored_qk(ckpt, mc, l);
      for (int h = 0; h < mc.n_head; ++h) {
        const auto& hj = j["layers"][size_t(l)]["heads"][size_t(h)];
        const bool scored = !(l == 1 && h == 0);  // the static head
        CHECK(hj["scored"] == scored);
        if (!scored) {
          CHECK(hj["kind"] == "static");
          CHECK(hj.contains("skipped"));
          continue;
        }
        const auto want = test::aoh_ref::full_qk_singular_values(stored.q(h), stored.k(h / 2), mc.n_embd, mc.head_dim());
        const auto got = hj["singular_values"].get<std::vector<double>>();
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i)  // squares: the reference holds eigenvalues of M^T M
          CHECK(std::abs(got[i] * got[i] - want[i] * want[i]) <= 1e-12 * want[0] * want[0]);
        CHECK(hj["effective_rank"].get<double>() == Approx(test::aoh_ref::entropy_rank(want)).epsilon(1e-10));
      }
      for (int g = 0; g < 2; ++g)
        CHECK(j["layers"][size_t(l)]["kv_heads"][size_t(g)]["score"].get<double>() ==
              Approx(ref[size_t(l)][size_t(g)]).epsilon(1e-10));
    }
    const auto want = test::aoh_ref::reference_streaming(ref, 0.5, per_layer);
    CHECK(streaming_in(j) == want);
    CHECK(j["n_streaming_kv_heads"] == 2);
    CHECK(attn::HeadPlan::from_json(j["head_plan"]) == implied_plan(want, "sink_window:2:4"));
    CHECK(test::last_json_line(r.out)["n_streaming_kv_heads"] == 2);
  }
  // Without --sink/--window the defaults (64 + 256) exceed this block: scores, but no plan.
  auto r = test::run_headwise("heads --checkpoint " + ckpt);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(test::last_json_line(r.out)["head_plan"].is_null());
}

TEST_CASE("convert applies AoH to a finished checkpoint with no data", "[cli][aoh]") {
  const std::string dir = test::cli_temp_dir("aoh_convert");
  const std::string ckpt = make_checkpoint(dir);
  const ModelConfig mc = tiny_config();
  const auto ref = test::aoh_ref::kv_reference_scores(ckpt, mc);
  const std::string out = dir + "/converted";
  auto r = test::run_headwise("convert --checkpoint " + ckpt + " --out " + out +
                              " --method aoh --set method.sparsity=0.5 --set method.sink=2 --set method.window=4");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const attn::HeadPlan want = implied_plan(test::aoh_ref::reference_streaming(ref, 0.5, false), "sink_window:2:4");
  CHECK(!fs::exists(out + ".tmp"));
  for (const char* f : {"model.safetensors", "config.json", "convert.json"}) CHECK(fs::exists(out + "/" + f));
  auto model = load_model(out, cpu_backend<float>());
  CHECK(model->config().head_plan == want);
  int changed = 0;  // scored query heads of the 2 streaming KV heads (the static head stays)
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) changed += !(want.layers[size_t(l)][size_t(h)] == mc.head_plan.layers[size_t(l)][size_t(h)]);
  CHECK(changed >= 3);
  CHECK(test::last_json_line(r.out)["changed_heads"] == changed);
  CHECK(r.out.find("-> sink_window:2:4") != std::string::npos);
  // No parameter moved: every stored tensor is the input's, bit for bit.
  io::SafetensorsReader a(ckpt + "/model.safetensors"), b(out + "/model.safetensors");
  CHECK(a.names() == b.names());
  for (const auto& n : a.names()) {
    const auto& info = a.info(n);
    if (info.dtype != DType::F32) continue;
    int64_t numel = 1;
    for (auto d : info.shape) numel *= d;
    std::vector<float> x(static_cast<size_t>(numel)), y(static_cast<size_t>(numel));
    a.read(n, DType::F32, info.shape, x.data());
    b.read(n, DType::F32, info.shape, y.data());
    CHECK(x == y);
  }
  // Per layer through --set, into an existing OUT (replaced whole).
  r = test::run_headwise("convert --checkpoint " + ckpt + " --out " + out +
                         " --method aoh --set method.per_layer=true --set method.sink=2 --set method.window=4");
  REQUIRE(r.code == 0);
  CHECK(read_checkpoint_config(out).head_plan ==
        implied_plan(test::aoh_ref::reference_streaming(ref, 0.5, true), "sink_window:2:4"));
}

TEST_CASE("heads and convert: bad input is one error line naming the key", "[cli][aoh]") {
  const std::string dir = test::cli_temp_dir("aoh_bad");
  const std::string ckpt = make_checkpoint(dir);
  const std::string out = dir + "/never";
  const std::string convert = "convert --checkpoint " + ckpt + " --out " + out + " --method ";
  expect_one_error(test::run_headwise(convert + "aoh --set method.sparsity=1.5 --set method.sink=2 --set method.window=4"),
                   "method.sparsity must be in [0, 1]");
  expect_one_error(test::run_headwise(convert + "aoh"), "method.sink + method.window");  // 64 + 256 > 24
  expect_one_error(test::run_headwise(convert + "aoh --set method.sink=2 --set method.window=4 --set method.ratio=0.5"),
                   "method.ratio");
  expect_one_error(test::run_headwise(convert + "no_such_method"), "is not a method");
  // SAF calibrates on data: convert has none (on an all-softmax checkpoint, which SAF starts from).
  expect_one_error(test::run_headwise("convert --checkpoint " + make_checkpoint(dir, true) + " --out " + out +
                                      " --method saf --set method.calib_seq_len=16"),
                   "needs calibration data");
  expect_one_error(test::run_headwise(convert + "aoh --set train.steps=3"), "--set takes method.");
  expect_one_error(test::run_headwise("convert --checkpoint " + dir + "/missing --out " + out + " --method aoh"),
                   "no such directory");
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(out + ".tmp"));
  expect_one_error(test::run_headwise("heads --checkpoint " + ckpt + " --sparsity 1.5"), "--sparsity must be in [0, 1]");
}
