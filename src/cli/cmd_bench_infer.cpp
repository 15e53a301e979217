// headwise bench-infer --checkpoint CKPT --context N [--plan-from CKPT2 | --method NAME
//                      [--set method.key=value]...] [--prefill-warmup 3] [--prefill-runs 10]
//                      [--decode-warmup 50] [--decode-runs 100] [--seed S] [--side both|plan|all-softmax]
// Cached inference of one plan against all-softmax on the same weights, in one run (DuoAttention's
// protocol): prefill latency of N tokens (warm-up, then timed runs), decode latency per token at
// context N (the cache prefilled with N - warmup - runs tokens, then warm-up and timed steps, so
// the timed steps see contexts N - runs .. N - 1), KV-cache bytes, the decoder's bytes (weights,
// cache, scratch) and the process's peak RSS during each side. The plan is the checkpoint's own,
// CKPT2's (same shapes; weights stay CKPT's), or the one a data-free method makes of CKPT
// (data_free_method.hpp, as `convert` does: e.g. --method aoh --set method.sparsity=0.5).
// --side plan|all-softmax times one side alone, so that a script can alternate the two in fresh
// processes (A-B-B-A rounds: scripts/reproduce/aoh.sh) instead of trusting one process's order.
// --batch B [--memory-budget GB]: B sequences decoded together instead (bench_infer_batch.hpp):
// KV bytes per sequence of both plans, the largest batch that fits the budget, total tokens/s.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/bench_infer_batch.hpp"
#include "cli/commands.hpp"
#include "cli/data_free_method.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/infer/cached_decoder.hpp"
#include "headwise/infer/load_for_decoding.hpp"
#include "headwise/infer/read_bandwidth.hpp"
#include "headwise/infer/sampler.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {

struct BenchInferArgs {
  std::string checkpoint, plan_from, method;
  std::vector<std::string> sets;
  int64_t context = 0;
  int64_t prefill_warmup = 3, prefill_runs = 10, decode_warmup = 50, decode_runs = 100;
  uint64_t seed = 1337;
  std::string weights = "fp32";
  std::string kv_cache;  // empty: kv_precision_for's default
  std::string side = "both";
  int batch = 0;          // 0: one sequence (the table above)
  double budget_gb = 0;   // --memory-budget; 0: the machine's physical memory
  bool shared_prompt = false;  // --shared-prompt
};

struct Side {
  std::string plan_name;
  double prefill_ms = 0, prefill_median_ms = 0, decode_ms = 0, decode_median_ms = 0;
  int64_t kv_bytes = 0, decoder_bytes = 0, peak_rss = -1, weight_bytes = 0;
  int n_full = 0, n_ring = 0, n_v_only = 0, n_state_only = 0, n_none = 0;
  nlohmann::json plan;
};

double mean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return x.empty() ? 0.0 : s / double(x.size());
}
double median(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

Side run_side(Model<float>& model, const std::vector<int32_t>& tokens, const BenchInferArgs& a) {
  Side s;
  s.plan = model.config().head_plan.to_json();
  const int64_t N = a.context;
  reset_peak_rss();
  {
    const infer::WeightPrecision w = infer::parse_weight_precision(a.weights);
    const infer::Fp32Layout layout = infer::relay_for_decoding(model, w);
    infer::CachedDecoder dec(model, N, 64, 512, w, {}, infer::kv_precision_for(w, a.kv_cache), layout);
    std::vector<double> pre, dec_ms;
    for (int64_t r = 0; r < a.prefill_warmup + a.prefill_runs; ++r) {
      dec.reset();
      const Stopwatch timer;
      dec.prefill(tokens.data(), N);
      const double ms = timer.ms();
      if (r >= a.prefill_warmup) pre.push_back(ms);
    }
    const int64_t steps = a.decode_warmup + a.decode_runs;
    dec.reset();
    const float* logits = dec.prefill(tokens.data(), N - steps);
    for (int64_t r = 0; r < steps; ++r) {
      const int32_t next = infer::argmax(logits, dec.vocab_size());
      const Stopwatch timer;
      logits = dec.step(next);
      const double ms = timer.ms();
      if (r >= a.decode_warmup) dec_ms.push_back(ms);
    }
    s.prefill_ms = mean(pre);
    s.prefill_median_ms = median(pre);
    s.decode_ms = mean(dec_ms);
    s.decode_median_ms = median(dec_ms);
    s.kv_bytes = int64_t(dec.kv_bytes());
    s.weight_bytes = int64_t(dec.weight_bytes_per_token());
    s.decoder_bytes = int64_t(model.params().bytes() + model.buffers().bytes() + dec.kv_bytes() + dec.scratch_bytes() +
                              dec.half_weight_bytes());
    const auto& c = dec.cache();
    for (int l = 0; l < c.n_layer(); ++l)
      for (int g = 0; g < c.n_kv_head(); ++g) {
        const auto& p = c.policy(l, g);
        if (p.rows == attn::KvRows::All && p.has_k) ++s.n_full;
        else if (p.rows == attn::KvRows::All) ++s.n_v_only;
        else if (p.rows == attn::KvRows::SinkRing) ++s.n_ring;
        else if (p.linear_state) ++s.n_state_only;
        else ++s.n_none;
      }
  }
  s.peak_rss = peak_rss_bytes();
  return s;
}

// A STREAM-like read test on the run's threads: the best of 5 sums over 512 MiB (far past the
// caches), in GB/s. What a decode step, which reads each weight once, can at best stream.
// GB/s a decode step streams: its matrices once plus the KV cache (full at the timed steps).
double decode_gbps(const Side& s) {
  return s.decode_median_ms > 0 ? double(s.weight_bytes + s.kv_bytes) / s.decode_median_ms / 1e6 : 0.0;
}

nlohmann::json side_json(const Side& s) {
  return {{"prefill_ms", s.prefill_ms},
          {"prefill_median_ms", s.prefill_median_ms},
          {"decode_ms_per_token", s.decode_ms},
          {"decode_median_ms_per_token", s.decode_median_ms},
          {"kv_cache_bytes", s.kv_bytes},
          {"decoder_bytes", s.decoder_bytes},
          {"peak_rss_bytes", s.peak_rss},
          {"weight_bytes_per_token", s.weight_bytes},
          {"decode_gb_per_s", decode_gbps(s)},
          {"kv_heads", {{"full", s.n_full}, {"sink_ring", s.n_ring}, {"v_only", s.n_v_only},
                        {"state_only", s.n_state_only}, {"none", s.n_none}}},
          {"head_plan", s.plan}};
}

}  // namespace

void add_bench_infer_command(CLI::App& app) {
  auto a = std::make_shared<BenchInferArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench-infer", "Prefill and decode latency, KV-cache bytes and peak memory of a plan vs all-softmax");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  cmd->add_option("--context", a->context, "Context N: prefill length and decode position")->required();
  auto* pf = cmd->add_option("--plan-from", a->plan_from, "Take the head plan (and head values) of this checkpoint");
  auto* me = cmd->add_option("--method", a->method, "Or the plan a data-free method makes of CKPT (as convert)");
  pf->excludes(me);
  cmd->add_option("--set", a->sets, "A key of --method: method.key=value (repeatable)");
  cmd->add_option("--prefill-warmup", a->prefill_warmup, "Untimed prefills (default 3)");
  cmd->add_option("--prefill-runs", a->prefill_runs, "Timed prefills (default 10)");
  cmd->add_option("--decode-warmup", a->decode_warmup, "Untimed decode steps (default 50)");
  cmd->add_option("--decode-runs", a->decode_runs, "Timed decode steps (default 100)");
  cmd->add_option("--seed", a->seed, "Seed of the random prompt tokens");
  cmd->add_option("--weights", a->weights, "Precision of the matrices: fp32 (default), bf16 or fp16");
  cmd->add_option("--kv-cache", a->kv_cache,
                  "Precision of the KV cache's K/V rows: fp32, bf16 or fp16 (default: fp32 with fp32 weights, fp16 "
                  "with 16-bit ones)");
  cmd->add_option("--side", a->side,
                  "Time both sides (default), or only the plan or only all-softmax (one process per side, for "
                  "alternated rounds)")
      ->check(CLI::IsMember({"both", "plan", "all-softmax"}));
  cmd->add_option("--batch", a->batch,
                  "Decode B sequences together (prompts of N - decode steps random tokens each; the prefill is "
                  "timed once, --prefill-* do not apply): KV bytes per sequence, largest batch in the budget, "
                  "total tokens/s");
  cmd->add_option("--memory-budget", a->budget_gb,
                  "With --batch: memory in GB (1e9 bytes) for weights, scratch and caches (default: the machine's "
                  "physical memory)");
  cmd->add_flag("--shared-prompt", a->shared_prompt,
                "With --batch: prefill one prompt and copy its cache to every sequence (llama-batched-bench -pps); "
                "the decode steps are the same work, the prefill B times shorter");
  cmd->callback([a] {
    const attn::KvPrecision kv = infer::kv_precision_for(infer::parse_weight_precision(a->weights), a->kv_cache);
    // (bad values fail before any loading)
    check(a->prefill_warmup >= 0 && a->prefill_runs >= 1 && a->decode_warmup >= 0 && a->decode_runs >= 1,
          "--prefill-runs and --decode-runs must be >= 1, the warm-ups >= 0");
    check(a->sets.empty() || !a->method.empty(), "--set needs --method");
    check(a->batch >= 0, "--batch must be >= 1, got " + std::to_string(a->batch));
    check(a->budget_gb >= 0, "--memory-budget must be > 0 GB");
    check(a->budget_gb == 0 || a->batch > 0, "--memory-budget needs --batch");
    check(!a->shared_prompt || a->batch > 0, "--shared-prompt needs --batch");
    auto model = load_model(a->checkpoint, cpu_backend<float>(), /*trainable=*/false);
    if (model->config().lora.enabled()) model->merge_adapters();  // decoding reads the merged weights
    const ModelConfig cfg = model->config();
    const int64_t N = a->context;
    check(N >= 1 && N <= cfg.block_size, "--context " + std::to_string(N) + " must be in 1..the checkpoint's context (" +
                                             std::to_string(cfg.block_size) + ")");
    check(N > a->decode_warmup + a->decode_runs,
          "--context " + std::to_string(N) + " must exceed --decode-warmup + --decode-runs (" +
              std::to_string(a->decode_warmup + a->decode_runs) + "): the decode steps run at the end of the context");
    std::string plan_name = "checkpoint";
    if (!a->plan_from.empty()) {
      check(std::filesystem::exists(a->plan_from), "--plan-from " + a->plan_from + ": no such directory");
      const ModelConfig other = read_checkpoint_config(a->plan_from);
      check(other.n_layer == cfg.n_layer && other.n_head == cfg.n_head && other.kv_heads() == cfg.kv_heads() &&
                other.n_embd == cfg.n_embd && other.block_size == cfg.block_size,
            "--plan-from " + a->plan_from + ": its model shape differs from --checkpoint's");
      io::SafetensorsSet st(a->plan_from);
      model->install_plan(other.head_plan, read_head_extras(st, other));
      plan_name = "plan-from";
    } else if (!a->method.empty()) {
      apply_data_free_method(*model, a->method, a->sets, "bench-infer --method " + a->method);
      plan_name = a->method;
    }
    for (int l = 0; l < cfg.n_layer; ++l)
      for (const auto& h : model->config().head_plan.layers[size_t(l)])
        check(h.kind != attn::HeadKind::SinkWindow || h.sink + h.window <= N,
              "layer " + std::to_string(l) + " has head " + h.str() + ": sink + window exceeds --context " +
                  std::to_string(N));
    auto load_reference = [a, &cfg] {
      auto ref_model = load_model(a->checkpoint, cpu_backend<float>(), /*trainable=*/false);
      if (ref_model->config().lora.enabled()) ref_model->merge_adapters();
      if (!ref_model->config().head_plan.all_softmax())
        ref_model->install_plan(attn::HeadPlan::uniform(cfg.n_layer, cfg.n_head), {});
      return ref_model;
    };
    if (a->batch > 0) {
      BatchBenchOptions o;
      o.batch = a->batch;
      o.context = N;
      o.decode_warmup = a->decode_warmup;
      o.decode_runs = a->decode_runs;
      o.seed = a->seed;
      o.weights = a->weights;
      o.kv_cache = a->kv_cache;
      o.side = a->side;
      o.plan_name = plan_name;
      o.budget_gb = a->budget_gb;
      o.shared_prompt = a->shared_prompt;
      bench_infer_batch(std::move(model), load_reference, o);
      return;
    }
    Rng rng(a->seed);
    std::vector<int32_t> tokens(static_cast<size_t>(N));
    for (auto& t : tokens) t = int32_t(rng.below(uint64_t(cfg.vocab_size)));
    std::fprintf(stderr, "bench-infer: context %lld, %s plan vs all-softmax ...\n", static_cast<long long>(N),
                 plan_name.c_str());
    const bool time_plan = a->side != "all-softmax", time_ref = a->side != "plan";
    Side plan, ref;
    if (time_plan) {
      plan = run_side(*model, tokens, *a);
      plan.plan_name = plan_name;
    }
    model.reset();  // the reference side loads its own copy: the two peaks share the same baseline
    if (time_ref) {
      auto ref_model = load_reference();
      ref = run_side(*ref_model, tokens, *a);
      ref.plan_name = "all-softmax";
    }
    nlohmann::json out = {{"context", N},
                          {"plan_source", plan_name},
                          {"side", a->side},
                          {"weights", a->weights},
                          {"kv_cache", attn::kv_precision_name(kv)}};
    if (!time_plan || !time_ref) {  // one side: its figures alone; the caller pairs the processes
      const Side& s = time_plan ? plan : ref;
      std::printf("bench-infer: context %lld, %s only: prefill %.3f ms, decode %.4f ms/token (median %.4f), "
                  "KV %lld bytes\n",
                  static_cast<long long>(N), s.plan_name.c_str(), s.prefill_ms, s.decode_ms, s.decode_median_ms,
                  static_cast<long long>(s.kv_bytes));
      out[time_plan ? "plan" : "all_softmax"] = side_json(s);
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
    std::printf("bench-infer: context %lld (decode timed at %lld..%lld), %lld+%lld prefills, %lld+%lld decode steps\n",
                static_cast<long long>(N), static_cast<long long>(N - a->decode_runs),
                static_cast<long long>(N - 1), static_cast<long long>(a->prefill_warmup),
                static_cast<long long>(a->prefill_runs), static_cast<long long>(a->decode_warmup),
                static_cast<long long>(a->decode_runs));
    std::printf("%-26s %16s %16s %8s\n", "", plan.plan_name.c_str(), "all-softmax", "ratio");
    auto row = [&](const char* name, double x, double y, const char* fmt) {
      char bx[64], by[64];
      std::snprintf(bx, sizeof bx, fmt, x);
      std::snprintf(by, sizeof by, fmt, y);
      std::printf("%-26s %16s %16s %8.4f\n", name, bx, by, ratio(x, y));
    };
    row("prefill ms", plan.prefill_ms, ref.prefill_ms, "%.3f");
    row("decode ms/token", plan.decode_ms, ref.decode_ms, "%.4f");
    row("decode median ms/token", plan.decode_median_ms, ref.decode_median_ms, "%.4f");
    row("KV-cache bytes", double(plan.kv_bytes), double(ref.kv_bytes), "%.0f");
    row("decoder bytes", double(plan.decoder_bytes), double(ref.decoder_bytes), "%.0f");
    row("peak RSS bytes", double(plan.peak_rss), double(ref.peak_rss), "%.0f");
    const double bw = infer::read_bandwidth_gbps();
    row("decode GB/s (weights+KV)", decode_gbps(plan), decode_gbps(ref), "%.2f");
    std::printf("%-26s %16.2f   (%s weights, %s KV cache; 512 MiB sum, same threads, this run)\n",
                "read bandwidth GB/s", bw, a->weights.c_str(), attn::kv_precision_name(kv));
    std::printf("KV heads (%s): %d full, %d sink+ring, %d V-only, %d state-only, %d none\n", plan.plan_name.c_str(),
                plan.n_full, plan.n_ring, plan.n_v_only, plan.n_state_only, plan.n_none);
    out.update({{"read_bandwidth_gb_per_s", bw},
                {"plan", side_json(plan)},
                {"all_softmax", side_json(ref)},
                {"prefill_ratio", ratio(plan.prefill_ms, ref.prefill_ms)},
                {"decode_ratio", ratio(plan.decode_ms, ref.decode_ms)},
                {"decode_median_ratio", ratio(plan.decode_median_ms, ref.decode_median_ms)},
                {"kv_bytes_ratio", ratio(double(plan.kv_bytes), double(ref.kv_bytes))},
                {"decoder_bytes_ratio", ratio(double(plan.decoder_bytes), double(ref.decoder_bytes))},
                {"peak_rss_ratio", ratio(double(plan.peak_rss), double(ref.peak_rss))}});
    std::printf("%s\n", out.dump().c_str());
  });
}

}  // namespace hw::cli
