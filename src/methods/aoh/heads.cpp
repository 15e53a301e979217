#include "headwise/methods/aoh/heads.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/methods/aoh/spectrum.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/param_layout.hpp"

namespace hw::aoh {

std::set<std::string> scored_weights(const ModelConfig& cfg) {
  std::set<std::string> names;
  for (int l = 0; l < cfg.n_layer; ++l) names.insert("h." + std::to_string(l) + ".attn.c_attn.weight");
  return names;
}

HeadScores score_model(const Model<float>& model) {
  const ModelConfig& mc = model.config();
  HeadScores s;
  s.n_layer = mc.n_layer;
  s.n_head = mc.n_head;
  s.n_kv_head = mc.kv_heads();
  s.head_dim = mc.head_dim();
  s.n_embd = mc.n_embd;
  const int C = mc.n_embd, d = mc.head_dim();
  std::vector<float> w;
  for (int l = 0; l < mc.n_layer; ++l) {
    const attn::LayerLayout& lay = model.layouts()[size_t(l)];
    const attn::LayerPlan& lp = mc.head_plan.layers[size_t(l)];
    bool any = false;
    for (int h = 0; h < mc.n_head; ++h) any = any || lp[size_t(h)].softmax_family();
    if (any) {
      // Compact c_attn weight [n_embd, qkv_width]: column q_col(h) + c is Q channel c of head h,
      // k_col(g) + c is K channel c of KV head g (param_layout.hpp).
      // (a base frozen under LoRA, e.g. after OAL, keeps it among the buffers)
      const std::string name = "h." + std::to_string(l) + ".attn.c_attn.weight";
      const Tensor* t = model.params().find(name);
      if (!t) t = model.buffers().find(name);
      check(t != nullptr, "AoH: the model has no tensor " + name);
      // The spectra are of the base W_Q, W_K: exact while the q/k adapters are fresh (B = 0).
      for (LoraTarget target : {LoraTarget::Q, LoraTarget::K}) {
        if (!mc.lora.has(target) || !mc.lora.on_layer(l)) continue;
        const Tensor* b = model.params().find(lora_b_name(l, target));
        if (!b) continue;
        const std::vector<float> bv = read_device(model.ops(), b->as<float>(), b->numel());
        for (float x : bv)
          check(x == 0.f, "AoH: layer " + std::to_string(l) + " has trained LoRA adapters on " +
                              lora_target_name(target) + " (" + lora_b_name(l, target) +
                              " is not zero); AoH scores W_K^T W_Q of the weights: merge the adapters first "
                              "(headwise merge)");
      }
      check(t->shape.size() == 2 && t->shape[0] == C && t->shape[1] == lay.qkv_width(),
            "AoH: h." + std::to_string(l) + ".attn.c_attn.weight does not have the layer's layout");
      read_device(model.ops(), t->as<float>(), t->numel(), w);
    }
    const int64_t width = lay.qkv_width();
    // Columns [col, col + d) of the layer's weight, as a d_model x d_head double matrix.
    auto columns = [&](int64_t col) {
      std::vector<double> m(size_t(C) * size_t(d));
      for (int i = 0; i < C; ++i)
        for (int c = 0; c < d; ++c) m[size_t(i) * size_t(d) + size_t(c)] = double(w[size_t(i * width + col + c)]);
      return m;
    };
    std::vector<HeadScore> layer(static_cast<size_t>(mc.n_head));
    std::vector<bool> kv_used(size_t(mc.kv_heads()), false);
    for (int h = 0; h < mc.n_head; ++h) {
      HeadScore& hs = layer[size_t(h)];
      hs.layer = l;
      hs.head = h;
      hs.kv_head = lay.kv_head_of(h);
      hs.spec = lp[size_t(h)];
      if (!hs.spec.softmax_family()) continue;
      check(lay.q_slot[size_t(h)] >= 0 && lay.k_slot[size_t(hs.kv_head)] >= 0,
            "AoH: layer " + std::to_string(l) + " head " + std::to_string(h) + " has no Q or K weights");
      kv_used[size_t(hs.kv_head)] = true;
    }
    // Each KV head's R_K once (it serves all its query heads), then every query head; heads in
    // parallel, each one's numbers its own (the same on any thread count).
    std::vector<std::vector<double>> rk(size_t(mc.kv_heads()));
    ParallelErrors errors;  // (a non-finite weight's error leaves the team as one hw::Error)
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < mc.kv_heads(); ++g)
      errors.run([&] {
        if (kv_used[size_t(g)]) rk[size_t(g)] = qr_r_factor(columns(lay.k_col(g)), C, d);
      });
    errors.rethrow();
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < mc.n_head; ++h)
      errors.run([&] {
        HeadScore& hs = layer[size_t(h)];
        if (!hs.spec.softmax_family()) return;
        hs.scored = true;
        hs.sigma = qk_singular_values_from_r(qr_r_factor(columns(lay.q_col(h)), C, d), rk[size_t(hs.kv_head)], d);
        hs.effective_rank = effective_rank(hs.sigma);
      });
    errors.rethrow();
    for (auto& hs : layer) s.heads.push_back(std::move(hs));
  }
  s.kv = kv_scores(s.heads, s.n_layer, s.n_head, s.n_kv_head);
  return s;
}

std::vector<KvScore> kv_scores(const std::vector<HeadScore>& heads, int n_layer, int n_head, int n_kv_head) {
  check(n_kv_head > 0 && n_head % n_kv_head == 0 && heads.size() == size_t(n_layer) * size_t(n_head),
        "AoH: kv_scores needs n_layer x n_head head scores and n_kv_head dividing n_head");
  const int group = n_head / n_kv_head;
  std::vector<KvScore> kv;
  for (int l = 0; l < n_layer; ++l)
    for (int g = 0; g < n_kv_head; ++g) {
      KvScore k;
      k.layer = l;
      k.kv_head = g;
      for (int h = g * group; h < (g + 1) * group; ++h) {
        k.query_heads.push_back(h);
        const HeadScore& hs = heads[size_t(l) * size_t(n_head) + size_t(h)];
        if (!hs.scored) continue;
        k.score = k.scored ? std::min(k.score, hs.effective_rank) : hs.effective_rank;
        k.scored = true;
      }
      kv.push_back(std::move(k));
    }
  return kv;
}

int classify(std::vector<KvScore>& kv, double sparsity, bool per_layer, std::optional<uint64_t> random_seed) {
  check(sparsity >= 0.0 && sparsity <= 1.0, "AoH: sparsity must be in [0, 1]");
  for (auto& k : kv) k.streaming = false;
  // Groups ranked separately: all KV heads (global) or each layer's.
  std::vector<std::vector<size_t>> groups;
  if (per_layer) {
    int max_layer = -1;
    for (const auto& k : kv) max_layer = std::max(max_layer, k.layer);
    groups.resize(size_t(max_layer + 1));
    for (size_t i = 0; i < kv.size(); ++i)
      if (kv[i].scored) groups[size_t(kv[i].layer)].push_back(i);
  } else {
    groups.emplace_back();
    for (size_t i = 0; i < kv.size(); ++i)
      if (kv[i].scored) groups[0].push_back(i);
  }
  int n_stream = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    auto& g = groups[gi];
    if (random_seed) {  // Fisher-Yates from the group's own stream
      Rng rng(data::derive_seed(*random_seed, data::Stream::AohRandomSelect, gi));
      for (size_t i = g.size(); i > 1; --i) std::swap(g[i - 1], g[size_t(rng.below(i))]);
    } else {
      // Highest effective rank first; equal scores keep the (layer, kv head) order.
      std::stable_sort(g.begin(), g.end(), [&](size_t a, size_t b) { return kv[a].score > kv[b].score; });
    }
    const auto k = size_t(std::llround(sparsity * double(g.size())));
    for (size_t i = 0; i < k && i < g.size(); ++i) kv[g[i]].streaming = true;
    n_stream += int(std::min(k, g.size()));
  }
  return n_stream;
}

attn::HeadPlan streaming_plan(const attn::HeadPlan& plan, const HeadScores& scores, int sink, int window) {
  attn::HeadPlan out = plan;
  attn::HeadSpec sw;
  sw.kind = attn::HeadKind::SinkWindow;
  sw.sink = sink;
  sw.window = window;
  const std::string why = sw.invalid_reason();
  check(why.empty(), "AoH: sink_window:" + std::to_string(sink) + ":" + std::to_string(window) + ": " + why);
  for (const KvScore& k : scores.kv) {
    if (!k.streaming) continue;
    for (int h : k.query_heads)
      if (scores.head(k.layer, h).scored) out.layers[size_t(k.layer)][size_t(h)] = sw;
  }
  return out;
}

nlohmann::json to_json(const HeadScores& s) {
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < s.n_layer; ++l) {
    nlohmann::json heads = nlohmann::json::array(), kvs = nlohmann::json::array();
    for (int h = 0; h < s.n_head; ++h) {
      const HeadScore& hs = s.head(l, h);
      nlohmann::json j = {{"head", h}, {"kv_head", hs.kv_head}, {"kind", hs.spec.str()}, {"scored", hs.scored}};
      if (hs.scored) {
        j["effective_rank"] = hs.effective_rank;
        j["singular_values"] = hs.sigma;
      } else {
        j["skipped"] = hs.spec.str() + " head (AoH scores softmax, window and sink_window heads)";
      }
      heads.push_back(std::move(j));
    }
    for (int g = 0; g < s.n_kv_head; ++g) {
      const KvScore& k = s.kv_head(l, g);
      kvs.push_back({{"kv_head", g},
                     {"query_heads", k.query_heads},
                     {"scored", k.scored},
                     {"score", k.scored ? nlohmann::json(k.score) : nlohmann::json(nullptr)},
                     {"class", !k.scored ? "skipped" : k.streaming ? "streaming" : "retrieval"}});
    }
    layers.push_back({{"layer", l}, {"heads", std::move(heads)}, {"kv_heads", std::move(kvs)}});
  }
  return {{"n_layer", s.n_layer}, {"n_head", s.n_head}, {"n_kv_head", s.n_kv_head},
          {"head_dim", s.head_dim}, {"n_embd", s.n_embd}, {"layers", std::move(layers)}};
}

}  // namespace hw::aoh
