#pragma once
// AoH's head scores and the retrieval/streaming split, from a model's weights alone (no data).
// The paper: "Autonomy-of-Heads" (AoH), arXiv 2608.06849; the method page: docs/methods/aoh.md.
//
// Every softmax-family query head h (softmax, window, sink_window) with its KV head g gets the
// singular values of M_h = W_K^g^T W_Q^h (spectrum.hpp; biases and RoPE are ignored, as in the
// paper) and their effective rank. A KV head's score is the minimum over its scored query heads
// (the most retrieval-like head decides: only a whole KV head shrinks the KV cache). Static,
// linear and pruned heads are skipped (their Q or K may not exist in the compact weights); a KV
// head none of whose query heads is scored is skipped too and never streams.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "headwise/attention/head_plan.hpp"
#include "headwise/model/model.hpp"

namespace hw::aoh {

struct HeadScore {
  int layer = 0, head = 0, kv_head = 0;
  attn::HeadSpec spec;  // the head's kind in the scored plan
  bool scored = false;  // false: not softmax-family, skipped
  std::vector<double> sigma;  // descending, d_head values (empty when skipped)
  double effective_rank = 0.0;
};

struct KvScore {
  int layer = 0, kv_head = 0;
  std::vector<int> query_heads;  // every query head of the group
  bool scored = false;           // some query head of the group was scored
  double score = 0.0;            // min effective rank over the scored query heads
  bool streaming = false;        // set by classify()
};

struct HeadScores {
  int n_layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, n_embd = 0;
  std::vector<HeadScore> heads;  // layer-major, n_layer * n_head
  std::vector<KvScore> kv;       // layer-major, n_layer * n_kv_head
  const HeadScore& head(int l, int h) const { return heads[size_t(l) * size_t(n_head) + size_t(h)]; }
  const KvScore& kv_head(int l, int g) const { return kv[size_t(l) * size_t(n_kv_head) + size_t(g)]; }
};

// Scores of every head of `model` under its current plan, from its c_attn weights (read from
// the parameter arena through the backend: works for a model on any device).
HeadScores score_model(const Model<float>& model);
// The model tensors score_model reads: every layer's attention weight (h.<l>.attn.c_attn.weight).
std::set<std::string> scored_weights(const ModelConfig& cfg);

// The KV-head scores from per-query-head scores: kv[g] = min over the query heads h of group g
// (h / (n_head / n_kv_head) == g) with scored[h]; skipped when none is.
std::vector<KvScore> kv_scores(const std::vector<HeadScore>& heads, int n_layer, int n_head, int n_kv_head);

// Marks as streaming the fraction `sparsity` of the scored KV heads with the HIGHEST score
// (effective rank): the paper (003_b396ccf96f5651e4.txt, "Diffuse Spectra ... streaming heads",
// "Concentrated Spectra ... retrieval heads") and notes/methods.md ("Low effective rank =
// retrieval head, high = streaming head"). Global (default): k = round(sparsity x scored KV heads
// of all layers), one threshold over all layers, as DuoAttention does; per_layer: round(sparsity
// x scored KV heads of the layer) in each layer. Ties go to the lower (layer, kv head) index.
// Returns the number of streaming KV heads.
// random_seed: instead of the highest scores, round(sparsity x count) scored KV heads per group
// drawn uniformly (a seeded shuffle of each group), the random-choice control.
int classify(std::vector<KvScore>& kv, double sparsity, bool per_layer,
             std::optional<uint64_t> random_seed = std::nullopt);

// `plan` with every scored query head of a streaming KV head as sink_window:sink:window (the
// layout is kept: softmax-family kinds share their parameters). Other heads are unchanged.
attn::HeadPlan streaming_plan(const attn::HeadPlan& plan, const HeadScores& scores, int sink, int window);

// {"n_layer", ..., "layers": [{"layer", "heads": [{"head", "kv_head", "kind", "scored",
// "effective_rank", "singular_values"} | {..., "scored": false, "skipped": "<kind> head"}],
// "kv_heads": [{"kv_head", "query_heads", "scored", "score", "class"}]}]}; class is
// "streaming", "retrieval" or "skipped".
nlohmann::json to_json(const HeadScores& scores);

}  // namespace hw::aoh
