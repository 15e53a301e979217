#pragma once
// `bench-infer --batch B`: B sequences decoded together at context N through the batched decoder
// (infer/batch_decoder.hpp), for a plan and for all-softmax on the same weights; the KV-cache
// bytes per sequence of both (from the plans' per-KV-head policies, not measured) and the
// largest batch that fits a memory budget.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "headwise/model/model.hpp"

namespace hw::cli {

struct BatchBenchOptions {
  int batch = 0;             // B >= 1
  int64_t context = 0;       // N
  int64_t decode_warmup = 0, decode_runs = 0;
  uint64_t seed = 0;         // of the prompts (sequence i: Rng(seed + i))
  std::string weights, kv_cache, side, plan_name;
  double budget_gb = 0;      // <= 0: the machine's physical memory
  bool shared_prompt = false;  // one prompt prefilled, its cache copied to every slot (llama-batched-bench -pps)
};

// `model` holds the plan; `load_reference` loads the same weights under all-softmax (called after
// `model` is released, so each side's peak RSS starts from the same baseline). Prints the table
// and one JSON line to stdout.
void bench_infer_batch(std::unique_ptr<Model<float>> model,
                       const std::function<std::unique_ptr<Model<float>>()>& load_reference,
                       const BatchBenchOptions& o);

}  // namespace hw::cli
