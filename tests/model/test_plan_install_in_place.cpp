// Plan changes in place (issue 55): Model::install_plan and add_adapters move the old blocks'
// values across tensor by tensor (move_arena_values), giving the old pages back as they go.
// Checked against the path they replaced: a model built for the new plan from scratch, filled
// from the old model through remap_arena (every tensor staged through its stored form on the
// host, as install_plan did before), on the fixture of every family; and the memory: a plan
// change of a model without gradients no longer holds the parameters three times.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "headwise/core/process_stats.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"
#include "model/model_test_util.hpp"

using namespace hw;

namespace {

// A plan that moves the layout: a static, a linear (G = 2) and a pruned head in layer 0, a
// static head in layer 1, with values of their own.
attn::HeadPlan moved_plan(const ModelConfig& mc, HeadExtras& extras) {
  attn::HeadPlan plan = mc.head_plan;
  plan.layers[0][0] = attn::HeadSpec{attn::HeadKind::Static};
  plan.layers[0][1] = attn::HeadSpec{attn::HeadKind::Linear};
  plan.layers[0][2] = attn::HeadSpec{attn::HeadKind::Pruned};
  plan.layers[1][3] = attn::HeadSpec{attn::HeadKind::Static};
  for (auto [l, h] : {std::pair{0, 0}, std::pair{1, 3}}) {
    StaticHeadValues v = default_static_values(mc.block_size);
    for (int i = 0; i < mc.block_size; ++i) {
      v.alpha[size_t(i)] = 0.01f * float((i * 7 + l) % 11);
      v.rho[size_t(i)] = -0.05f * float(i) + 0.1f * float(h);
    }
    extras.statics[{l, h}] = v;
  }
  LinearHeadValues lin = default_linear_values(mc.head_dim());
  lin.n_groups = 2;
  lin.L = {1.0f, 0.f, 0.f, 0.2f, 0.9f, 0.f, -0.1f, 0.3f, 0.8f};
  for (int r = 0; r < mc.head_dim(); ++r) lin.groups[size_t(r)] = 1 + r % 2;
  extras.linears[{0, 1}] = lin;
  return plan;
}

// The old path: a model of config `next` whose weights come from `from` through remap_arena.
std::unique_ptr<Model<float>> reference_as(Model<float>& from, const ModelConfig& next, const HeadExtras& extras) {
  auto ref = std::make_unique<Model<float>>(next, from.ops(), extras, from.trainable());
  std::vector<ParamSpec> frozen;
  for (const auto& s : ref->specs())
    if (s.frozen) frozen.push_back(s);
  for (Arena* a : {&from.params(), &from.buffers()}) {
    remap_arena<float>(from.ops(), *a, from.specs(), from.layouts(), ref->params(), ref->specs(), ref->layouts());
    remap_arena<float>(from.ops(), *a, from.specs(), from.layouts(), ref->buffers(), frozen, ref->layouts());
  }
  return ref;
}

// Every tensor equal, bit for bit (adapters too unless `adapters` is false: their A matrices are
// drawn by the model itself).
void require_same_model(const Model<float>& a, const Model<float>& b, bool adapters = true) {
  REQUIRE(a.config().head_plan == b.config().head_plan);
  for (const Arena* arena : {&a.params(), &a.buffers()}) {
    const Arena& other = arena == &a.params() ? b.params() : b.buffers();
    REQUIRE(arena->tensors().size() == other.tensors().size());
    for (const auto& t : arena->tensors()) {
      if (t->name.find(".log_z") != std::string::npos) continue;  // derived, computed on demand
      if (!adapters && t->name.find(".lora_") != std::string::npos) continue;
      const Tensor* u = other.find(t->name);
      INFO(t->name);
      REQUIRE(u != nullptr);
      REQUIRE(u->shape == t->shape);
      CHECK(std::memcmp(u->data, t->data, t->nbytes()) == 0);
    }
  }
}

}  // namespace

TEST_CASE("install_plan moves values as building the new plan and remapping does, on every family", "[model][plan]") {
  for (const char* family : {"hf_tiny_gpt2", "hf_tiny_llama", "hf_tiny_qwen2", "hf_tiny_qwen3"})
    for (bool trainable : {false, true}) {
      INFO(family << (trainable ? " trainable" : " inference"));
      auto model = load_model(test::fixture_dir(family), cpu_backend<float>(), trainable);
      HeadExtras extras;
      const attn::HeadPlan plan = moved_plan(model->config(), extras);
      auto before = load_model(test::fixture_dir(family), cpu_backend<float>(), trainable);
      ModelConfig next = before->config();
      next.head_plan = plan;
      auto ref = reference_as(*before, next, extras);
      REQUIRE_FALSE(model->install_plan(plan, extras));  // the layout moves
      require_same_model(*model, *ref);
      // Adapters with frozen base weights move every weight into the buffers.
      LoraConfig lora;
      lora.rank = 2;
      lora.freeze_base = true;
      model->add_adapters(lora, 5);
      next.lora = lora;
      auto ref2 = reference_as(*ref, next, ref->head_extras());
      require_same_model(*model, *ref2, /*adapters=*/false);
      // And the same numbers come out.
      const std::vector<int32_t> tok = {1, 5, 9, 2, 7, 3, 3, 8};
      model->forward(tok.data(), nullptr, 1, 8);
      ref2->forward(tok.data(), nullptr, 1, 8);
      std::vector<float> la, lb;
      model->read_logits(la);
      ref2->read_logits(lb);
      CHECK(la == lb);
    }
}

TEST_CASE("a plan change of a model without gradients holds its parameters about once", "[model][plan][memory]") {
  // ~100 MB of parameters; static heads in every layer move the attention tensors' layout.
  ModelConfig mc;
  mc.n_layer = 6;
  mc.n_head = 8;
  mc.n_embd = 768;
  mc.vocab_size = 8192;
  mc.block_size = 64;
  mc.validate();
  Model<float> model(mc, cpu_backend<float>(), {}, /*trainable=*/false);
  model.init_weights(3);
  const double params = double(model.params().bytes());
  attn::HeadPlan plan = mc.head_plan;
  for (int l = 0; l < mc.n_layer; ++l) plan.layers[size_t(l)][0] = attn::HeadSpec{attn::HeadKind::Static};
  const int64_t before = current_rss_bytes();
  REQUIRE(before > 0);
  if (!reset_peak_rss()) SUCCEED("no /proc/self/clear_refs here: the peak cannot be reset, nothing to measure");
  else {
    REQUIRE_FALSE(model.install_plan(plan, {}));
    const double peak = double(peak_rss_bytes());
    INFO("parameters " << params / 1e6 << " MB, RSS before " << double(before) / 1e6 << " MB, peak during the change "
                       << peak / 1e6 << " MB");
    // Before: the old block, a host copy of it and a device copy of that beside the new block
    // (+2x the parameters). Now each tensor's old pages go back as it moves: the largest tensor
    // (the 25 MB embedding) at most beside the parameters.
    CHECK(peak - double(before) <= 0.35 * params);
  }
}

TEST_CASE("static heads' normalisers are computed for the rows a step reads, and equal the eager ones",
          "[model][plan]") {
  auto model = load_model(test::fixture_dir("hf_tiny_llama"), cpu_backend<float>(), /*trainable=*/false);
  HeadExtras extras;
  const attn::HeadPlan plan = moved_plan(model->config(), extras);
  model->install_plan(plan, extras);
  const int n = model->config().block_size;  // 64
  const std::string name = "h.0.attn.static.0.";
  auto column = [&](const std::string& what) {
    const Tensor& t = model->buffers().get(name + what);
    return std::vector<float>(t.f32(), t.f32() + n);
  };
  std::vector<float> eager(static_cast<size_t>(n));
  const std::vector<float> alpha = column("alpha"), rho = column("rho");
  attn::static_log_normalisers(eager.data(), alpha.data(), rho.data(), n);
  CHECK(column("log_z") == std::vector<float>(size_t(n), 0.f));  // none yet: nothing ran
  const std::vector<int32_t> tok(16, 3);
  for (int T : {16, 8, 40}) {
    model->forward(tok.data(), nullptr, 1, std::min(T, 16));
    if (T == 40) model->ensure_static_normalisers(40);  // (what a decoder of context 40 asks)
    const int rows = T == 8 ? 16 : T;  // rows already there stay
    const std::vector<float> lz = column("log_z");
    INFO("T = " << T);
    for (int i = 0; i < n; ++i) CHECK(lz[size_t(i)] == (i < rows ? eager[size_t(i)] : 0.f));
  }
}
