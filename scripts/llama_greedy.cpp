// Greedy decoding with llama.cpp's C API on token ids (no tokenizer involved), for
// scripts/bench_decode_vs_llamacpp.sh: compiled there against the llama.cpp it builds (this file
// is ours; no llama.cpp source is copied into the repository).
// Usage: llama_greedy MODEL.gguf PROMPT_IDS_FILE N_NEW THREADS
// stdout: the N_NEW greedy token ids; stderr: one JSON line {prefill_ms, decode_ms_per_token}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "llama.h"

static void quiet(ggml_log_level, const char*, void*) {}

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT_IDS_FILE N_NEW THREADS\n", argv[0]);
    return 2;
  }
  const int n_new = std::atoi(argv[3]), threads = std::atoi(argv[4]);
  std::vector<llama_token> prompt;
  {
    std::ifstream in(argv[2]);
    long t;
    while (in >> t) prompt.push_back(llama_token(t));
  }
  if (prompt.empty() || n_new < 1) {
    std::fprintf(stderr, "error: empty prompt or N_NEW < 1\n");
    return 2;
  }
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "error: cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(prompt.size() + n_new);
  cp.n_batch = uint32_t(prompt.size());
  cp.n_ubatch = uint32_t(prompt.size());
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "error: cannot make a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  auto argmax = [&]() {
    const float* lg = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int i = 1; i < n_vocab; ++i)
      if (lg[i] > lg[best]) best = i;
    return llama_token(best);
  };
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))) != 0) return 1;
  llama_token tok = argmax();
  const auto t1 = clock::now();
  std::vector<llama_token> out{tok};
  for (int i = 1; i < n_new; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 1;
    tok = argmax();
    out.push_back(tok);
  }
  const auto t2 = clock::now();
  for (size_t i = 0; i < out.size(); ++i) std::printf(i ? " %d" : "%d", out[i]);
  std::printf("\n");
  const double pre = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double dec = std::chrono::duration<double, std::milli>(t2 - t1).count() / std::max(1, n_new - 1);
  std::fprintf(stderr, "{\"prefill_ms\": %.3f, \"decode_ms_per_token\": %.4f}\n", pre, dec);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
