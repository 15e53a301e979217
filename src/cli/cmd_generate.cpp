// headwise generate --checkpoint CKPT (--prompt TEXT | --prompt-tokens FILE) --max-new N
//                   [--temperature T] [--top-k K] [--top-p P] [--seed S]
// One prefill over the prompt, then token-by-token decode with the per-head KV cache of the
// checkpoint's plan (infer/decoder.hpp); tokens are written to stdout as they are drawn: text
// through the checkpoint's tokenizer.json when it has one (UTF-8 characters split across tokens
// are held until complete; an id past the tokenizer's vocabulary, i.e. padding, prints U+FFFD),
// bytes for a byte-level checkpoint, else token ids separated by spaces; a JSON summary goes to
// stderr.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/token_ids.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/data/bpe_tokenizer.hpp"
#include "headwise/data/tokenizer.hpp"
#include "headwise/infer/generate.hpp"
#include "headwise/infer/load_for_decoding.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/hf_family.hpp"

namespace hw::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, prompt_file;
  int64_t max_new = 0;
  bool ignore_eos = false;
  std::string weights = "fp32";
  std::string kv_cache;  // empty: kv_precision_for's default
  infer::SamplingOptions sampling;
};

std::vector<int32_t> read_prompt_tokens(const std::string& path, int vocab) {
  std::ifstream in(path);
  check(in.is_open(), "--prompt-tokens " + path + ": cannot open the file");
  return parse_token_ids(in, "--prompt-tokens " + path, vocab);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Sample from a checkpoint: one prefill, then cached decoding");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  auto* p = cmd->add_option("--prompt", a->prompt, "Prompt text (encoded with the checkpoint's tokenizer.json, or as bytes)");
  auto* pf = cmd->add_option("--prompt-tokens", a->prompt_file, "File of whitespace-separated token ids");
  p->excludes(pf);
  cmd->add_option("--max-new", a->max_new, "Tokens to generate")->required();
  cmd->add_option("--temperature", a->sampling.temperature, "Softmax temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", a->sampling.top_k, "Keep the K most likely tokens (0 = all)");
  cmd->add_option("--top-p", a->sampling.top_p, "Keep the smallest set reaching probability P (1 = all)");
  cmd->add_option("--seed", a->sampling.seed, "Sampling seed (default 1337)");
  cmd->add_option("--weights", a->weights,
                  "Precision the decoder reads the matrices in: fp32 (the checkpoint's, default), bf16 or fp16 "
                  "(rounded once from fp32, widened to fp32 in registers)");
  cmd->add_option("--kv-cache", a->kv_cache,
                  "Precision of the KV cache's K/V rows: fp32, bf16 or fp16 (default: fp32 with fp32 weights, fp16 "
                  "with 16-bit ones, as llama.cpp)");
  cmd->add_flag("--ignore-eos", a->ignore_eos,
                "Do not stop at the eos_token_id(s) of the checkpoint's generation_config.json");
  cmd->callback([a] {
    check(!a->prompt.empty() || !a->prompt_file.empty(), "generate needs --prompt TEXT or --prompt-tokens FILE");
    check(a->max_new >= 1, "--max-new must be >= 1, got " + std::to_string(a->max_new));
    a->sampling.validate();
    const infer::WeightPrecision weights = infer::parse_weight_precision(a->weights);
    const infer::KvPrecision kv = infer::kv_precision_for(weights, a->kv_cache);
    // (16-bit weights: rounded while loading, the fp32 matrices discarded; adapters merged.)
    infer::DecodingModel loaded = infer::load_for_decoding(a->checkpoint, weights);
    const auto& model = loaded.model;
    const ModelConfig& cfg = model->config();
    std::optional<data::BpeTokenizer> tok;
    const std::string tok_path = (std::filesystem::path(a->checkpoint) / "tokenizer.json").string();
    std::error_code ec;
    if (std::filesystem::is_regular_file(tok_path, ec)) {
      tok = data::BpeTokenizer::load(tok_path);
      check(tok->vocab_size() <= cfg.vocab_size, tok_path + " has " + std::to_string(tok->vocab_size()) +
                                                     " tokens, more than the model's vocab_size " +
                                                     std::to_string(cfg.vocab_size));
    }
    const bool bytes = !tok && cfg.vocab_size == data::kByteVocab;
    std::vector<int32_t> prompt;
    if (!a->prompt_file.empty()) {
      prompt = read_prompt_tokens(a->prompt_file, cfg.vocab_size);
      check(!prompt.empty(), "--prompt-tokens " + a->prompt_file + ": no tokens");
    } else if (tok) {
      // With the special tokens the tokenizer's post-processor adds (Llama 3's <|begin_of_text|>).
      for (uint32_t t : tok->encode_for_model(a->prompt)) prompt.push_back(int32_t(t));
      check(!prompt.empty(), "--prompt is empty");
    } else {
      check(bytes, "--prompt needs a tokenizer.json in the checkpoint or a byte-level checkpoint (vocab 256); "
                   "this one has vocab " + std::to_string(cfg.vocab_size) + " and no tokenizer.json: use --prompt-tokens");
      for (uint16_t t : data::encode_bytes(a->prompt)) prompt.push_back(int32_t(t));
    }
    const int64_t ctx = cfg.block_size;
    check(int64_t(prompt.size()) <= ctx, "the prompt has " + std::to_string(prompt.size()) +
                                             " tokens, longer than the checkpoint's context of " + std::to_string(ctx));
    check(int64_t(prompt.size()) + a->max_new - 1 <= ctx,
          "the prompt (" + std::to_string(prompt.size()) + " tokens) and --max-new " + std::to_string(a->max_new) +
              " need " + std::to_string(int64_t(prompt.size()) + a->max_new - 1) +
              " positions, more than the checkpoint's context of " + std::to_string(ctx));
    for (int l = 0; l < cfg.n_layer; ++l)
      for (const auto& h : cfg.head_plan.layers[size_t(l)])
        check(h.kind != attn::HeadKind::SinkWindow || h.sink + h.window <= ctx,
              "layer " + std::to_string(l) + " has head " + h.str() + ": sink + window exceeds the context of " +
                  std::to_string(ctx));
    // The cache holds the positions this run uses, not the whole context (32K for Qwen2.5).
    // Prefill in chunks of 512 rows: larger GEMMs (Qwen2.5-0.5B's shape, 2048 positions, one
    // thread: 27.4 s in chunks of 64, 22.0 s in chunks of 512), for a few MB of scratch.
    constexpr int64_t kPrefillChunk = 512;
    infer::Decoder dec(*model, std::max<int64_t>(int64_t(prompt.size()) + a->max_new - 1, 1), kPrefillChunk, 512,
                       weights, std::move(loaded.half), kv, loaded.fp32_layout);
    infer::Sampler sampler(a->sampling, cfg.vocab_size);
    infer::GenerateTimes times;
    const std::vector<int32_t> eos = a->ignore_eos ? std::vector<int32_t>{} : eos_token_ids(a->checkpoint, cfg.vocab_size);
    bool first = true;
    data::Utf8Holdback held;
    std::string piece;
    const auto out = infer::generate(
        dec, sampler, prompt, a->max_new,
        [&](int32_t t) {
          if (tok) {
            piece.clear();
            if (tok->has_token(uint32_t(t))) tok->append_token_bytes(uint32_t(t), piece);
            else piece = "\xEF\xBF\xBD";  // a padding id (past the tokenizer): no text
            const std::string ready = held.push(piece);
            std::fwrite(ready.data(), 1, ready.size(), stdout);
          } else if (bytes) std::fputc(t, stdout);
          else std::fprintf(stdout, first ? "%d" : " %d", t);
          first = false;
          std::fflush(stdout);
        },
        &times, eos);
    const std::string rest = held.flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const double decode_steps = double(std::max<size_t>(out.size(), 1) - 1);
    const double decode_ms = decode_steps > 0 ? times.decode_ms / decode_steps : 0.0;
    nlohmann::json summary = {{"prompt_tokens", prompt.size()},
                              {"new_tokens", out.size()},
                              {"prefill_ms", times.prefill_ms},
                              {"decode_ms_per_token", decode_ms},
                              {"weights", infer::weight_precision_name(weights)},
                              {"kv_cache", infer::kv_precision_name(kv)},
                              {"weight_bytes_per_token", dec.weight_bytes_per_token()},
                              // the matrices once per token (the KV read is not counted here)
                              {"decode_weight_gb_per_s",
                               decode_ms > 0 ? double(dec.weight_bytes_per_token()) / decode_ms / 1e6 : 0.0},
                              {"kv_cache_bytes", dec.kv_bytes()},
                              {"peak_rss_bytes", peak_rss_bytes()},
                              {"seed", a->sampling.seed},
                              {"stopped_at_eos", !out.empty() && int64_t(out.size()) < a->max_new},
                              {"temperature", a->sampling.temperature}};
    std::fprintf(stderr, "%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::cli
