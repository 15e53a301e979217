// Parameters follow the plan: compact layouts, storage in Hugging Face shapes, in-place plan
// changes that keep surviving rows (and their optimizer moments) and the same function.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "headwise/core/rng.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"
#include "headwise/optim/adamw.hpp"
#include "support/temp_dir.hpp"

using namespace hw;

namespace {

ModelConfig gqa_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.vocab_size = 17;
  c.block_size = 16;
  return c;
}

attn::HeadPlan mixed_plan() {
  return attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["static", "pruned", "softmax", "window:4"], ["static", "static", "sink_window:2:3", "pruned"]])"));
}

std::vector<int32_t> tokens(int64_t n, uint64_t seed, int vocab) {
  Rng r(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = int32_t(r.below(uint64_t(vocab)));
  return v;
}

std::string temp_dir(const std::string& name) { return test::scratch_dir("plan_params_" + name); }

}  // namespace

TEST_CASE("compact QKV and output layouts drop exactly the unused rows", "[model][plan]") {
  ModelConfig c = gqa_config();
  c.head_plan = mixed_plan();
  Model<float> m(c, cpu_backend<float>());
  const int64_t hd = 8, C = 32;
  // Layer 0: Q for heads 2, 3; K for group 1 only (heads 2,3); V for group 0 (head 0 static) and 1.
  CHECK(m.params().get("h.0.attn.c_attn.weight").shape == std::vector<int64_t>{C, (2 + 1 + 2) * hd});
  CHECK(m.params().get("h.0.attn.c_proj.weight").shape == std::vector<int64_t>{3 * hd, C});
  // Layer 1: Q for head 2; K group 1; V group 0 (heads 0,1 static) and group 1 (head 2).
  CHECK(m.params().get("h.1.attn.c_attn.weight").shape == std::vector<int64_t>{C, (1 + 1 + 2) * hd});
  CHECK(m.params().get("h.1.attn.c_proj.weight").shape == std::vector<int64_t>{3 * hd, C});
  CHECK(m.buffers().find("h.1.attn.static.1.alpha") != nullptr);
  CHECK(m.params().find("h.1.attn.static.1.alpha") == nullptr);  // a buffer, no gradient
}

TEST_CASE("a converted model saved and reloaded gives the same loss", "[model][plan][io]") {
  ModelConfig c = gqa_config();
  c.head_plan = mixed_plan();
  HeadExtras ex;
  StaticHeadValues sv = default_static_values(c.block_size);
  for (int i = 0; i < c.block_size; ++i) {
    sv.alpha[size_t(i)] = 0.1f * float(i % 5);
    sv.rho[size_t(i)] = -0.3f * float(i);
  }
  ex.statics[{0, 0}] = sv;
  Model<float> m(c, cpu_backend<float>(), ex);
  m.init_weights(11);
  const auto x = tokens(2 * 16, 1, 17), y = tokens(2 * 16, 2, 17);
  const double before = m.forward(x.data(), y.data(), 2, 16);
  const std::string dir = temp_dir("converted");
  save_model_files(m, dir);
  // Stored shapes are Hugging Face's whatever the plan; unused rows are zeros.
  io::SafetensorsReader st(dir + "/model.safetensors");
  CHECK(st.info("h.0.attn.c_attn.weight").shape == std::vector<int64_t>{32, (4 + 2 * 2) * 8});
  std::vector<float> w(32 * 64);
  st.read("h.0.attn.c_attn.weight", DType::F32, {32, 64}, w.data());
  for (int r = 0; r < 32; ++r)
    for (int col = 0; col < 16; ++col) CHECK(w[size_t(r * 64 + col)] == 0.0f);  // Q of heads 0, 1
  auto back = load_model(dir, cpu_backend<float>());
  CHECK(back->config().head_plan == c.head_plan);
  const double after = back->forward(x.data(), y.data(), 2, 16);
  CHECK(after == before);
}

TEST_CASE("install_plan keeps the unchanged heads' function and their moments", "[model][plan]") {
  ModelConfig c = gqa_config();
  Model<float> m(c, cpu_backend<float>());
  m.init_weights(5);
  AdamW opt({}, cpu_backend<float>(), m.params());
  const auto x = tokens(2 * 16, 3, 17), y = tokens(2 * 16, 4, 17);
  m.zero_grads();
  m.forward_backward(x.data(), y.data(), 2, 16, 1.0);
  opt.step(m.params(), m.grads(), 1e-3, 1);
  // Reference: a model built directly with the target plan from the same stored weights.
  const std::string dir = temp_dir("install");
  save_model_files(m, dir);
  const auto old_specs = m.specs();
  const auto old_layouts = m.layouts();
  std::vector<float> old_q_moment;  // moment of head 2's Q columns (kept)
  {
    const Tensor& mom = opt.m().get("h.0.attn.c_attn.weight");
    for (int r = 0; r < 32; ++r)
      for (int d = 0; d < 8; ++d) old_q_moment.push_back(mom.f32()[r * mom.shape[1] + 2 * 8 + d]);
  }
  attn::HeadPlan plan = mixed_plan();
  m.install_plan(plan, {});
  auto [om, ov] = opt.rebuild(m.params());
  remap_arena<float>(cpu_backend<float>(), *om, old_specs, old_layouts, opt.m(), m.specs(), m.layouts());
  remap_arena<float>(cpu_backend<float>(), *ov, old_specs, old_layouts, opt.v(), m.specs(), m.layouts());
  ModelConfig c2 = c;
  c2.head_plan = plan;
  Model<float> ref(c2, cpu_backend<float>());
  io::SafetensorsReader st(dir + "/model.safetensors");
  // The reference's weights from the stored (Hugging Face) tensors by hand, not through the
  // library's mapping (copy_mapped, which install_plan uses too). Stored c_attn columns are
  // q heads 0..3, k groups 0..1, v groups 0..1, 8 each; the compact layout keeps, in that order,
  // the Q of heads with a query, the K of groups some softmax-family head reads and the V of
  // groups some unpruned head reads; c_proj keeps the rows of unpruned heads.
  //   layer 0 [static, pruned, softmax, window:4]: Q heads 2, 3; K group 1; V groups 0, 1; rows 0, 2, 3
  //   layer 1 [static, static, sink_window, pruned]: Q head 2; K group 1; V groups 0, 1; rows 0, 1, 2
  const int64_t hd = 8, C = 32, full = 64;
  const std::vector<std::vector<int64_t>> qkv_blocks = {{2, 3, 4 + 1, 6 + 0, 6 + 1}, {2, 4 + 1, 6 + 0, 6 + 1}};
  const std::vector<std::vector<int64_t>> out_blocks = {{0, 2, 3}, {0, 1, 2}};
  int mapped = 0;
  for (const auto& s : ref.specs()) {
    if (s.role != ParamRole::Param) continue;
    std::vector<float> stored(size_t(stored_numel(s)));
    st.read(s.name, DType::F32, s.stored_shape, stored.data());
    float* dst = ref.params().get(s.name).f32();
    const bool qkv_w = s.name.ends_with("attn.c_attn.weight"), qkv_b = s.name.ends_with("attn.c_attn.bias");
    const bool out_w = s.name.ends_with("attn.c_proj.weight");
    if (qkv_w || qkv_b) {
      const auto& blocks = qkv_blocks[size_t(s.layer)];
      const int64_t rows = qkv_w ? C : 1, width = int64_t(blocks.size()) * hd;
      REQUIRE(ref.params().get(s.name).numel() == rows * width);
      for (int64_t r = 0; r < rows; ++r)
        for (size_t blk = 0; blk < blocks.size(); ++blk)
          for (int64_t i = 0; i < hd; ++i)
            dst[r * width + int64_t(blk) * hd + i] = stored[size_t(r * full + blocks[blk] * hd + i)];
      ++mapped;
    } else if (out_w) {
      const auto& blocks = out_blocks[size_t(s.layer)];
      REQUIRE(ref.params().get(s.name).numel() == int64_t(blocks.size()) * hd * C);
      for (size_t blk = 0; blk < blocks.size(); ++blk)
        for (int64_t r = 0; r < hd; ++r)
          for (int64_t col = 0; col < C; ++col)
            dst[(int64_t(blk) * hd + r) * C + col] = stored[size_t((blocks[blk] * hd + r) * C + col)];
      ++mapped;
    } else {
      REQUIRE(ref.params().get(s.name).numel() == int64_t(stored.size()));
      std::copy(stored.begin(), stored.end(), dst);
    }
  }
  CHECK(mapped == 6);  // c_attn weight and bias, c_proj weight, in each layer
  CHECK(m.forward(x.data(), y.data(), 2, 16) == ref.forward(x.data(), y.data(), 2, 16));
  // Head 2 of layer 0 is now Q slot 0 of the compact layout.
  const Tensor& mom = opt.m().get("h.0.attn.c_attn.weight");
  CHECK(m.layouts()[0].q_slot[2] == 0);
  size_t k = 0;
  for (int r = 0; r < 32; ++r)
    for (int d = 0; d < 8; ++d) CHECK(mom.f32()[r * mom.shape[1] + d] == old_q_moment[k++]);
  CHECK(old_q_moment[5] != 0.0f);
}
