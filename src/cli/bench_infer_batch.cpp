#include "cli/bench_infer_batch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/infer/batch_decoder.hpp"
#include "headwise/infer/load_for_decoding.hpp"
#include "headwise/infer/sampler.hpp"
#include "headwise/core/process_stats.hpp"

namespace hw::cli {

namespace {

struct BatchSide {
  bool timed = false;
  int64_t kv_per_seq = 0;             // kv_cache_bytes of the side's plan at context N
  int64_t weight_bytes = 0;           // the weights as `generate` holds them (see weights_held)
  int64_t scratch_bytes = 0;          // the engine's, built for B sequences
  double prefill_ms = 0, decode_ms = 0, decode_median_ms = 0;  // prefill: all B prompts, one feed
  int64_t peak_rss = -1;
};

double median_of(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// Bytes of the weights as `generate` holds them while decoding: fp32, the model's parameters and
// buffers; 16-bit, the rounded copies plus every fp32 parameter that is not one of them (norms,
// biases, position table; an untied embedding) plus the buffers (generate discards the fp32
// matrices as it rounds them; bench-infer itself keeps them, to convert plans).
int64_t weights_held(const Model<float>& model, infer::WeightPrecision w, size_t half_bytes) {
  if (w == infer::WeightPrecision::FP32) return int64_t(model.params().bytes() + model.buffers().bytes());
  const std::string head = model.config().tie_word_embeddings ? "wte.weight" : "lm_head.weight";
  size_t rest = model.buffers().bytes();
  for (const auto& t : model.params().tensors()) {
    int64_t in = 0, out = 0;
    if (t->name == head || infer::decoder_layer_matrix(model, t->name, &in, &out)) continue;
    rest += size_t(t->numel()) * sizeof(float);
  }
  return int64_t(half_bytes + rest);
}

BatchSide run_batch_side(Model<float>& model, const BatchBenchOptions& o) {
  BatchSide s;
  s.timed = true;
  reset_peak_rss();
  {
    infer::BatchDecoderOptions bo;
    bo.max_batch = o.batch;
    bo.max_context = o.context;
    bo.weights = infer::parse_weight_precision(o.weights);
    bo.kv = infer::kv_precision_for(bo.weights, o.kv_cache);
    bo.layout = infer::relay_for_decoding(model, bo.weights);
    infer::BatchDecoder dec(model, bo);
    const int V = dec.vocab_size();
    const int64_t steps = o.decode_warmup + o.decode_runs, P = o.context - steps;
    const int n_prompts = o.shared_prompt ? 1 : o.batch;
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(n_prompts));
    std::vector<infer::SlotTokens> feed;
    for (int b = 0; b < o.batch; ++b) dec.open();
    for (int b = 0; b < n_prompts; ++b) {
      Rng rng(o.seed + uint64_t(b));
      for (int64_t i = 0; i < P; ++i) prompts[size_t(b)].push_back(int32_t(rng.below(uint64_t(V))));
      feed.push_back({b, prompts[size_t(b)].data(), P});
    }
    Stopwatch clock;
    dec.feed(feed);
    // A shared prompt (llama-batched-bench -pps): prefilled once, its cache copied to every
    // other slot; the decode steps are the same work either way.
    for (int b = 1; b < o.batch && o.shared_prompt; ++b) dec.copy_slot(0, b);
    s.prefill_ms = clock.ms();
    feed.resize(size_t(o.batch));
    std::vector<int32_t> next(size_t(o.batch));
    std::vector<double> step_ms;
    for (int64_t r = 0; r < steps; ++r) {
      for (int b = 0; b < o.batch; ++b) {
        next[size_t(b)] = infer::argmax(dec.logits(b), V);
        feed[size_t(b)] = {b, &next[size_t(b)], 1};
      }
      clock.restart();
      dec.feed(feed);
      if (r >= o.decode_warmup) step_ms.push_back(clock.ms());
    }
    double sum = 0;
    for (double v : step_ms) sum += v;
    s.decode_ms = sum / double(step_ms.size());
    s.decode_median_ms = median_of(step_ms);
    s.kv_per_seq = int64_t(dec.cache_bytes());
    s.scratch_bytes = int64_t(dec.scratch_bytes());
    s.weight_bytes = weights_held(model, bo.weights, dec.half_weight_bytes());
  }
  s.peak_rss = peak_rss_bytes();
  return s;
}

// The largest number of sequences whose caches fit beside the fixed bytes (weights + scratch);
// -1: no limit (a plan that caches nothing).
int64_t largest_batch(double budget, const BatchSide& s) {
  if (s.kv_per_seq == 0) return -1;
  const double left = budget - double(s.weight_bytes + s.scratch_bytes);
  return left <= 0 ? 0 : int64_t(left / double(s.kv_per_seq));
}

nlohmann::json batch_side_json(const BatchSide& s, double budget, int64_t B, int64_t P, int64_t prompts) {
  nlohmann::json j = {{"kv_cache_bytes_per_sequence", s.kv_per_seq},
                      {"kv_cache_bytes_batch", s.kv_per_seq * B}};
  if (!s.timed) return j;
  const int64_t mb = largest_batch(budget, s);
  j.update({{"weight_bytes", s.weight_bytes},
            {"scratch_bytes", s.scratch_bytes},
            {"max_batch_in_budget", mb >= 0 ? nlohmann::json(mb) : nlohmann::json(nullptr)},
            {"prefill_ms", s.prefill_ms},
            {"prefill_tokens_per_s", s.prefill_ms > 0 ? double(prompts * P) / s.prefill_ms * 1e3 : 0.0},
            {"decode_ms_per_step", s.decode_ms},
            {"decode_median_ms_per_step", s.decode_median_ms},
            {"decode_tokens_per_s", s.decode_ms > 0 ? double(B) / s.decode_ms * 1e3 : 0.0},
            {"peak_rss_bytes", s.peak_rss}});
  return j;
}

}  // namespace

void bench_infer_batch(std::unique_ptr<Model<float>> model,
                       const std::function<std::unique_ptr<Model<float>>()>& load_reference,
                       const BatchBenchOptions& o) {
  const ModelConfig cfg = model->config();
  const attn::KvPrecision kv = infer::kv_precision_for(infer::parse_weight_precision(o.weights), o.kv_cache);
  const int64_t N = o.context, B = o.batch;
  const double budget = o.budget_gb > 0 ? o.budget_gb * 1e9
                                        : double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  const std::string budget_source = o.budget_gb > 0 ? "--memory-budget" : "physical memory";
  BatchSide plan, ref;
  plan.kv_per_seq = int64_t(infer::kv_cache_bytes(cfg, cfg.head_plan, N, kv));
  ref.kv_per_seq = int64_t(infer::kv_cache_bytes(cfg, attn::HeadPlan::uniform(cfg.n_layer, cfg.n_head), N, kv));
  std::fprintf(stderr, "bench-infer: %lld sequences at context %lld, %s plan vs all-softmax ...\n",
               static_cast<long long>(B), static_cast<long long>(N), o.plan_name.c_str());
  if (o.side != "all-softmax") {
    const int64_t counted = plan.kv_per_seq;
    plan = run_batch_side(*model, o);
    check(plan.kv_per_seq == counted, "internal: the engine's cache differs from the plan's count");
  }
  model.reset();  // the reference side loads its own copy: the two peaks share the same baseline
  if (o.side != "plan") {
    auto ref_model = load_reference();
    const int64_t counted = ref.kv_per_seq;
    ref = run_batch_side(*ref_model, o);
    check(ref.kv_per_seq == counted, "internal: the engine's cache differs from the all-softmax count");
  }
  const int64_t P = N - o.decode_warmup - o.decode_runs;
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  std::printf("bench-infer: %lld sequences together, context %lld (prompts of %lld, decode timed at %lld..%lld), "
              "%s weights, %s KV cache\n",
              static_cast<long long>(B), static_cast<long long>(N), static_cast<long long>(P),
              static_cast<long long>(N - o.decode_runs), static_cast<long long>(N - 1), o.weights.c_str(),
              attn::kv_precision_name(kv));
  std::printf("%-34s %16s %16s %8s\n", "", o.plan_name.c_str(), "all-softmax", "ratio");
  auto row = [&](const std::string& name, double x, double y, const char* fmt, bool have_x, bool have_y) {
    char bx[64] = "-", by[64] = "-";
    if (have_x) std::snprintf(bx, sizeof bx, fmt, x);
    if (have_y) std::snprintf(by, sizeof by, fmt, y);
    if (have_x && have_y) std::printf("%-34s %16s %16s %8.4f\n", name.c_str(), bx, by, ratio(x, y));
    else std::printf("%-34s %16s %16s\n", name.c_str(), bx, by);
  };
  row("KV-cache bytes per sequence", double(plan.kv_per_seq), double(ref.kv_per_seq), "%.0f", true, true);
  row("KV-cache bytes, " + std::to_string(B) + " sequences", double(plan.kv_per_seq * B), double(ref.kv_per_seq * B),
      "%.0f", true, true);
  row("weight bytes (as generate holds)", double(plan.weight_bytes), double(ref.weight_bytes), "%.0f", plan.timed,
      ref.timed);
  row("scratch bytes (" + std::to_string(B) + " sequences)", double(plan.scratch_bytes), double(ref.scratch_bytes),
      "%.0f", plan.timed, ref.timed);
  char budget_name[80];
  std::snprintf(budget_name, sizeof budget_name, "largest batch in %.4g GB", budget / 1e9);
  const double mb_plan = double(largest_batch(budget, plan)), mb_ref = double(largest_batch(budget, ref));
  row(budget_name, mb_plan, mb_ref, "%.0f", plan.timed, ref.timed);
  const int64_t prompts = o.shared_prompt ? 1 : B;  // prompts prefilled
  row(o.shared_prompt ? "prefill tokens/s (the shared prompt)" : "prefill tokens/s (all prompts)",
      plan.prefill_ms > 0 ? double(prompts * P) / plan.prefill_ms * 1e3 : 0.0,
      ref.prefill_ms > 0 ? double(prompts * P) / ref.prefill_ms * 1e3 : 0.0, "%.1f", plan.timed, ref.timed);
  row("decode tokens/s (all sequences)", plan.decode_ms > 0 ? double(B) / plan.decode_ms * 1e3 : 0.0,
      ref.decode_ms > 0 ? double(B) / ref.decode_ms * 1e3 : 0.0, "%.2f", plan.timed, ref.timed);
  row("decode ms/step (median)", plan.decode_median_ms, ref.decode_median_ms, "%.4f", plan.timed, ref.timed);
  row("peak RSS bytes", double(plan.peak_rss), double(ref.peak_rss), "%.0f", plan.timed, ref.timed);
  std::printf("(largest batch = floor((budget - weights - scratch) / KV bytes per sequence); budget from %s)\n",
              budget_source.c_str());
  nlohmann::json out = {{"batch", B},
                        {"context", N},
                        {"prompt_tokens", P},
                        {"plan_source", o.plan_name},
                        {"side", o.side},
                        {"weights", o.weights},
                        {"kv_cache", attn::kv_precision_name(kv)},
                        {"memory_budget_bytes", budget},
                        {"memory_budget_source", budget_source},
                        {"plan", batch_side_json(plan, budget, B, P, prompts)},
                        {"all_softmax", batch_side_json(ref, budget, B, P, prompts)},
                        {"shared_prompt", o.shared_prompt},
                        {"kv_bytes_ratio", ratio(double(plan.kv_per_seq), double(ref.kv_per_seq))}};
  if (plan.timed && ref.timed) {
    out["decode_tokens_per_s_ratio"] = ratio(ref.decode_ms, plan.decode_ms);
    out["peak_rss_ratio"] = ratio(double(plan.peak_rss), double(ref.peak_rss));
  }
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace hw::cli
