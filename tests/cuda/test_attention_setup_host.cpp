// Host side of the CUDA attention (attention_setup.cpp), no GPU needed: compiled into test_cuda
// and into test_emulated, which CI runs. The expectations come from the accessors the kernels
// themselves use (linear_progress, linear_slot, the staging formula of attention_params.hpp),
// not from a second copy of the layout arithmetic: every region the kernels address lies inside
// attention_workspace_floats(), no two regions overlap, and nothing but the sync region's
// alignment padding is left unused. (A test that restated the offsets by hand went stale when
// the sync region was added in front of the slots, and would have failed on the first GPU.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/layer_fixture.hpp"
#include "cuda/attention_bf16_cases.hpp"
#include "headwise/model/model_config.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_setup.hpp"

namespace {

using hw::cudatest::attn16::Case;
using hw::cudatest::attn16::kCases;

// Marks [begin, begin + n) of the workspace as owned by `who`; reports a region outside it or
// one that overlaps another.
struct Ownership {
  std::vector<std::string> owner;
  explicit Ownership(int64_t n) : owner(size_t(n)) {}
  void claim(int64_t begin, int64_t n, const std::string& who) {
    INFO(who << " at [" << begin << ", " << begin + n << ") of " << owner.size());
    REQUIRE(begin >= 0);
    REQUIRE(begin + n <= int64_t(owner.size()));
    for (int64_t i = begin; i < begin + n; ++i) {
      INFO("float " << i << " already belongs to " << owner[size_t(i)]);
      REQUIRE(owner[size_t(i)].empty());
      owner[size_t(i)] = who;
    }
  }
};

template <class St>
void check_workspace(const Case& cs, int D, int64_t T, int64_t B) {
  std::vector<hw::attn::HeadSpec> plan;
  for (const auto& s : cs.plan) plan.push_back(fx::spec(s.c_str()));
  const ref::Layer layer = fx::make_layer(plan, cs.kv, D, B, T, 70, 1);
  const fx::Packed<float> pk(layer);
  auto p = std::make_unique<hw::cuda::AttnLaunchParamsT<St>>();  // large: keep off the stack
  hw::cuda::fill_attention_params(*p, pk.plan, pk.layout, pk.dims, pk.params, true);
  const int64_t total = hw::cuda::attention_workspace_floats(pk.plan, pk.layout, pk.dims);
  std::vector<float> ws(static_cast<size_t>(total));
  p->workspace = ws.data();
  auto at = [&](const void* ptr) { return int64_t(static_cast<const float*>(ptr) - ws.data()); };

  Ownership own(total);
  const int H = layer.H, per_group = H / cs.kv;
  const int stages = hw::tiles::linear_stage_count(D);
  if (p->n_linear > 0) own.claim(at(hw::cuda::linear_ticket(*p)), 1, "ticket");
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      if (plan[size_t(h)].kind != hw::attn::HeadKind::Linear) continue;
      const std::string head = "b " + std::to_string(b) + " head " + std::to_string(h);
      for (int chain = 0; chain < 2; ++chain)
        own.claim(at(hw::cuda::linear_progress(*p, b, h, chain)), stages, head + " chain " + std::to_string(chain));
      own.claim(at(hw::cuda::linear_slot(*p, b, h)), p->linear_slot_floats, head + " linear slot");
    }
  // The staging slots of mixed KV groups (bf16 only), where attention_params.hpp says they are.
  int mixed = 0;
  for (int g = 0; g < cs.kv; ++g) {
    const int slot = p->heads[g * per_group].stage_slot;
    if (slot < 0) continue;
    ++mixed;
    for (int b = 0; b < B; ++b)
      own.claim(p->stage_offset + (int64_t(b) * p->n_stage + slot) * 2 * T * D, 2 * T * D,
                "b " + std::to_string(b) + " group " + std::to_string(g) + " staging");
  }
  CHECK(mixed == p->n_stage);
  // Unused: only the sync region's padding to a multiple of 32 floats (fp32 storage also leaves
  // the staging, which the size has no storage type to leave out, untouched).
  if constexpr (std::is_same_v<St, hw::bf16>) {
    int64_t unused = 0;
    for (const auto& o : own.owner) unused += o.empty();
    CHECK(unused < 32);
  }
  if (p->n_linear == 0) CHECK(total == 0);
}

}  // namespace

TEST_CASE("CUDA attention setup: the linear sync region, slots and bf16 staging tile the workspace exactly") {
  for (const Case& cs : kCases)
    for (int D : {64, 128})
      for (int64_t T : {1, 100}) {
        INFO("plan of " << cs.plan.size() << " heads, kv " << cs.kv << ", D " << D << ", T " << T);
        check_workspace<float>(cs, D, T, 2);
        check_workspace<hw::bf16>(cs, D, T, 2);
      }
}

TEST_CASE("CUDA attention setup: bf16 stages exactly the KV groups mixing linear heads with others") {
  for (const Case& cs : kCases) {
    std::vector<hw::attn::HeadSpec> plan;
    for (const auto& s : cs.plan) plan.push_back(fx::spec(s.c_str()));
    const ref::Layer layer = fx::make_layer(plan, cs.kv, 64, 3, 70, 1);
    const fx::Packed<float> pk(layer);
    INFO("kv " << cs.kv);
    const int per_group = layer.H / cs.kv;
    auto f32 = std::make_unique<hw::cuda::AttnLaunchParams>();
    auto b16 = std::make_unique<hw::cuda::AttnLaunchParamsBf16>();
    hw::cuda::fill_attention_params(*f32, pk.plan, pk.layout, pk.dims, pk.params, true);
    hw::cuda::fill_attention_params(*b16, pk.plan, pk.layout, pk.dims, pk.params, true);
    CHECK(f32->n_stage == 0);
    int mixed = 0;
    for (int g = 0; g < cs.kv; ++g) {
      bool linear = false, other = false;
      for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
        const auto k = plan[size_t(h)].kind;
        linear = linear || k == hw::attn::HeadKind::Linear;
        other = other || (k != hw::attn::HeadKind::Linear && k != hw::attn::HeadKind::Pruned);
      }
      for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
        CHECK(f32->heads[h].stage_slot == -1);
        CHECK(b16->heads[h].stage_slot == (h == g * per_group && linear && other ? mixed : -1));
      }
      mixed += linear && other;
    }
    CHECK(b16->n_stage == mixed);
  }
}

// A paper-scale config meant for GPUs must have a shape the CUDA attention takes: the 1B SAF
// config once had head_dim 96 (1536 / 16), which the kernels refuse, so its job would have
// failed at its first step on the cluster.
TEST_CASE("CUDA attention setup: every shipped config with train.device = cuda has a shape the kernels take") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(HEADWISE_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
    if (!doc.contains("train") || doc["train"].value("device", "cpu") != "cuda") continue;
    INFO(e.path().filename().string());
    hw::ModelConfig m = hw::ModelConfig::from_json(doc.at("model"));
    m.validate();
    const hw::attn::LayerPlan plan(size_t(m.n_head), hw::attn::HeadSpec::parse("softmax"));
    const auto layout = hw::attn::LayerLayout::build(plan, m.n_head, m.kv_heads(), m.head_dim());
    const hw::attn::AttnDims dims{doc["train"].value("micro_batch", int64_t(1)), doc["train"].at("seq_len").get<int64_t>()};
    const hw::attn::LayerHeadParams<float> params;
    CHECK_NOTHROW(hw::cuda::check_attention_layer(plan, layout, dims, params, true));
    ++n;
  }
  CHECK(n >= 10);
}
