// The bf16 copy of the weights the GEMMs and the embedding read (Precision::Bf16) follows the
// fp32 master weights: it is rounded again before every forward (so an update between steps is
// seen) and rebuilt when install_plan changes the parameter layout (so no copy points into the
// old block or at another tensor's offset). Checked against a double model holding the same
// master weights; a stale copy is off by the whole update, far beyond bf16 rounding.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"
#include "model/model_test_util.hpp"

using namespace hw;

namespace {

ModelConfig copy_config() {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 32;
  cfg.vocab_size = 37;
  cfg.block_size = 16;
  cfg.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:5", "static", "softmax"], ["softmax", "softmax", "pruned", "softmax"]])"));
  return cfg;
}

// max |bf16 logits - double logits| / max |double logits| for the same tokens.
double logits_err(Model<float>& half, const ModelConfig& cfg) {
  Model<double> ref(cfg, cpu_backend<double>());
  test::copy_to_double(half, ref);
  std::vector<int32_t> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((i * 7 + 3) % 37);
  half.forward(x.data(), nullptr, 2, 16);
  ref.forward(x.data(), nullptr, 2, 16);
  std::vector<float> got;
  std::vector<double> want;
  half.read_logits(got);
  ref.read_logits(want);
  REQUIRE(got.size() == want.size());
  return test::max_rel_err(got, want);
}

// Every matmul weight and wte changed in place, as an optimizer step would.
void perturb_weights(Model<float>& m) {
  for (const auto& t : m.params().tensors()) {
    if (t->dtype != DType::F32) continue;
    const bool gemm_read = t->name == "wte.weight" || t->name.find("c_attn") != std::string::npos ||
                           t->name.find("c_proj") != std::string::npos || t->name.find("c_fc") != std::string::npos;
    if (!gemm_read) continue;
    float* p = t->f32();
    for (int64_t i = 0; i < t->numel(); ++i) p[i] = -1.5f * p[i] + 0.01f * float(i % 7);
  }
}

}  // namespace

TEST_CASE("the bf16 weight copy follows master-weight updates and install_plan", "[model][bf16]") {
  const ModelConfig cfg = copy_config();
  Model<float> half(cfg, cpu_backend<float>());
  half.init_weights(21);
  half.set_precision(Precision::Bf16);
  CHECK(logits_err(half, half.config()) < 2e-2);

  perturb_weights(half);  // between two forwards, like an optimizer update
  CHECK(logits_err(half, half.config()) < 2e-2);

  // A new plan changes the parameter block's layout (the pruned head gets q/k/v columns).
  half.install_plan(attn::HeadPlan::from_json(nlohmann::json::parse(
                        R"([["softmax", "softmax", "softmax", "window:3"], ["softmax", "softmax", "softmax", "softmax"]])")),
                    {});
  perturb_weights(half);
  CHECK(logits_err(half, half.config()) < 2e-2);
}
