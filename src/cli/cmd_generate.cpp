// headwise generate --checkpoint CKPT (--prompt TEXT | --prompt-tokens FILE | --prompts FILE) --max-new N
//                   [--temperature T] [--top-k K] [--top-p P] [--seed S] [--max-batch B]
// One prefill over the prompt, then token-by-token decode with the per-head KV cache of the
// checkpoint's plan (infer/cached_decoder.hpp); tokens are written to stdout as they are drawn: text
// through the checkpoint's tokenizer.json when it has one (UTF-8 characters split across tokens
// are held until complete; an id past the tokenizer's vocabulary, i.e. padding, prints U+FFFD),
// bytes for a byte-level checkpoint, else token ids separated by spaces; a JSON summary goes to
// stderr.
// Several prompts (--prompts FILE: one prompt text per line; --prompt-tokens FILE with several
// lines: one sequence of ids per line) decode together (infer/generate_batch.hpp, up to
// --max-batch at once); each line's output is printed as a block "=== line N ===" followed by its
// text or ids, in line order as soon as it and the lines before it are done. Every line is read
// and checked before any decoding: a bad one is one error naming the file and the line.
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
#include "headwise/infer/generate_batch.hpp"
#include "headwise/infer/load_for_decoding.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/hf_family.hpp"

namespace hw::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, prompt_file, prompts_file;
  int64_t max_new = 0;
  int max_batch = 0;  // 0: every prompt at once, at most kDefaultMaxBatch
  bool ignore_eos = false;
  std::string weights = "fp32";
  std::string kv_cache;  // empty: kv_precision_for's default
  infer::SamplingOptions sampling;
};

constexpr int kDefaultMaxBatch = 16;

// The lines of a prompt file (a final line break ends the last line; "\r\n" counts as one).
std::vector<std::string> read_lines(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  check(in.is_open(), option + " " + path + ": cannot open the file");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  check(!in.bad(), option + " " + path + ": read error");
  return lines;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\v\f") == std::string::npos; }

// --prompt-tokens FILE: one sequence of whitespace-separated ids per line; a bad line is one
// error naming it ("FILE line N: ...").
std::vector<std::vector<int32_t>> read_prompt_tokens(const std::string& path, int vocab) {
  const auto lines = read_lines(path, "--prompt-tokens");
  check(!lines.empty(), "--prompt-tokens " + path + ": no tokens");
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = path + " line " + std::to_string(i + 1);
    check(!blank(lines[i]), where + ": the line is empty (one prompt of token ids per line)");
    std::istringstream line(lines[i]);
    out.push_back(parse_token_ids(line, where, vocab));
  }
  return out;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Sample from a checkpoint: one prefill, then cached decoding");
  cmd->add_option("--checkpoint", a->checkpoint, "Checkpoint directory")->required();
  auto* p = cmd->add_option("--prompt", a->prompt, "Prompt text (encoded with the checkpoint's tokenizer.json, or as bytes)");
  auto* pf = cmd->add_option("--prompt-tokens", a->prompt_file,
                             "File of whitespace-separated token ids, one prompt per line (several lines decode "
                             "together)");
  auto* ps = cmd->add_option("--prompts", a->prompts_file,
                             "File of prompt texts, one per line, encoded as --prompt; decoded together");
  p->excludes(pf);
  p->excludes(ps);
  pf->excludes(ps);
  cmd->add_option("--max-new", a->max_new, "Tokens to generate (per prompt)")->required();
  cmd->add_option("--max-batch", a->max_batch,
                  "Several prompts: at most this many decode at once, the rest wait for a free slot (default: all, "
                  "at most 16)");
  cmd->add_option("--temperature", a->sampling.temperature, "Softmax temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", a->sampling.top_k, "Keep the K most likely tokens (0 = all)");
  cmd->add_option("--top-p", a->sampling.top_p, "Keep the smallest set reaching probability P (1 = all)");
  cmd->add_option("--seed", a->sampling.seed,
                  "Sampling seed (default 1337); with several prompts, line N draws from stream N - 1 of it");
  cmd->add_option("--weights", a->weights,
                  "Precision the decoder reads the matrices in: fp32 (the checkpoint's, default), bf16 or fp16 "
                  "(rounded once from fp32, widened to fp32 in registers)");
  cmd->add_option("--kv-cache", a->kv_cache,
                  "Precision of the KV cache's K/V rows: fp32, bf16 or fp16 (default: fp32 with fp32 weights, fp16 "
                  "with 16-bit ones, as llama.cpp)");
  cmd->add_flag("--ignore-eos", a->ignore_eos,
                "Do not stop at the eos_token_id(s) of the checkpoint's generation_config.json");
  cmd->callback([a] {
    check(!a->prompt.empty() || !a->prompt_file.empty() || !a->prompts_file.empty(),
          "generate needs --prompt TEXT, --prompt-tokens FILE or --prompts FILE");
    check(a->max_new >= 1, "--max-new must be >= 1, got " + std::to_string(a->max_new));
    check(a->max_batch >= 0, "--max-batch must be >= 1, got " + std::to_string(a->max_batch));
    a->sampling.validate();
    const infer::WeightPrecision weights = infer::parse_weight_precision(a->weights);
    const attn::KvPrecision kv = infer::kv_precision_for(weights, a->kv_cache);
    // The prompts are read and checked against the config before the weights are loaded.
    const ModelConfig cfg = read_checkpoint_config(a->checkpoint);
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
    auto encode = [&](const std::string& text, const std::string& what) {
      std::vector<int32_t> ids;
      if (tok) {
        // With the special tokens the tokenizer's post-processor adds (Llama 3's <|begin_of_text|>).
        for (uint32_t t : tok->encode_for_model(text)) ids.push_back(int32_t(t));
      } else {
        check(bytes, what + " needs a tokenizer.json in the checkpoint or a byte-level checkpoint (vocab 256); "
                     "this one has vocab " + std::to_string(cfg.vocab_size) + " and no tokenizer.json: use --prompt-tokens");
        for (uint16_t t : data::encode_bytes(text)) ids.push_back(int32_t(t));
      }
      return ids;
    };
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> where;  // per prompt, for errors: "" (a single --prompt) or "FILE line N"
    if (!a->prompt_file.empty()) {
      prompts = read_prompt_tokens(a->prompt_file, cfg.vocab_size);
      for (size_t i = 0; i < prompts.size(); ++i) where.push_back(a->prompt_file + " line " + std::to_string(i + 1));
    } else if (!a->prompts_file.empty()) {
      const auto lines = read_lines(a->prompts_file, "--prompts");
      check(!lines.empty(), "--prompts " + a->prompts_file + ": no prompts");
      for (size_t i = 0; i < lines.size(); ++i) {
        where.push_back(a->prompts_file + " line " + std::to_string(i + 1));
        check(!lines[i].empty(), where.back() + ": the line is empty (one prompt per line)");
        prompts.push_back(encode(lines[i], "--prompts"));
        check(!prompts.back().empty(), where.back() + ": the prompt encodes to no tokens");
      }
    } else {
      prompts.push_back(encode(a->prompt, "--prompt"));
      check(!prompts.back().empty(), "--prompt is empty");
      where.push_back("");
    }
    const int64_t ctx = cfg.block_size;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string line = prompts.size() > 1 ? where[i] + ": " : "";
      const int64_t n = int64_t(prompts[i].size());
      check(n <= ctx, line + "the prompt has " + std::to_string(n) +
                          " tokens, longer than the checkpoint's context of " + std::to_string(ctx));
      check(n + a->max_new - 1 <= ctx,
            line + "the prompt (" + std::to_string(n) + " tokens) and --max-new " + std::to_string(a->max_new) +
                " need " + std::to_string(n + a->max_new - 1) + " positions, more than the checkpoint's context of " +
                std::to_string(ctx));
    }
    for (int l = 0; l < cfg.n_layer; ++l)
      for (const auto& h : cfg.head_plan.layers[size_t(l)])
        check(h.kind != attn::HeadKind::SinkWindow || h.sink + h.window <= ctx,
              "layer " + std::to_string(l) + " has head " + h.str() + ": sink + window exceeds the context of " +
                  std::to_string(ctx));
    // (16-bit weights: rounded while loading, the fp32 matrices discarded; adapters merged.)
    infer::DecodingModel loaded = infer::load_for_decoding(a->checkpoint, weights);
    const auto& model = loaded.model;
    const std::vector<int32_t> eos = a->ignore_eos ? std::vector<int32_t>{} : eos_token_ids(a->checkpoint, cfg.vocab_size);
    // A token's text: its bytes (a padding id past the tokenizer: U+FFFD), or the byte itself.
    std::string piece;
    auto text_of = [&](int32_t t) -> const std::string& {
      piece.clear();
      if (tok->has_token(uint32_t(t))) tok->append_token_bytes(uint32_t(t), piece);
      else piece = "\xEF\xBF\xBD";  // a padding id (past the tokenizer): no text
      return piece;
    };
    // Prefill in chunks of 512 rows: larger GEMMs (Qwen2.5-0.5B's shape, 2048 positions, one
    // thread: 27.4 s in chunks of 64, 22.0 s in chunks of 512), for a few MB of scratch.
    constexpr int64_t kPrefillChunk = 512;
    if (prompts.size() > 1) {  // decoded together: one block per line, in line order
      const size_t n = prompts.size();
      infer::BatchDecoderOptions o;
      o.max_batch = int(std::min<size_t>(n, a->max_batch > 0 ? size_t(a->max_batch) : size_t(kDefaultMaxBatch)));
      o.max_context = 1;
      for (const auto& pr : prompts) o.max_context = std::max<int64_t>(o.max_context, int64_t(pr.size()) + a->max_new - 1);
      o.chunk = kPrefillChunk;
      o.weights = weights;
      o.kv = kv;
      o.layout = loaded.fp32_layout;
      infer::BatchDecoder dec(*model, o, std::move(loaded.half));
      std::vector<infer::SequenceRequest> reqs;
      for (const auto& pr : prompts) reqs.push_back({pr, a->max_new, a->sampling, eos});
      std::vector<std::vector<int32_t>> got(n);
      std::vector<bool> done(n, false);
      size_t printed = 0;
      auto print_ready = [&] {  // the finished lines, in order
        for (; printed < n && done[printed]; ++printed) {
          std::string block = "=== line " + std::to_string(printed + 1) + " ===\n";
          if (tok) {
            for (int32_t t : got[printed]) block += text_of(t);
          } else if (bytes) {
            for (int32_t t : got[printed]) block.push_back(char(t));
          } else {
            for (size_t k = 0; k < got[printed].size(); ++k)
              block += (k ? " " : "") + std::to_string(got[printed][k]);
          }
          block += "\n";
          std::fwrite(block.data(), 1, block.size(), stdout);
          std::fflush(stdout);
        }
      };
      infer::BatchTimes times;
      infer::generate_batch(
          dec, reqs,
          [&](size_t i, int32_t t) {
            got[i].push_back(t);
            if (int64_t(got[i].size()) == a->max_new || std::find(eos.begin(), eos.end(), t) != eos.end()) {
              done[i] = true;
              print_ready();
            }
          },
          &times);
      nlohmann::json new_tokens = nlohmann::json::array(), prompt_tokens = nlohmann::json::array(),
                     stopped = nlohmann::json::array();
      int64_t total_new = 0;
      for (size_t i = 0; i < n; ++i) {
        prompt_tokens.push_back(prompts[i].size());
        new_tokens.push_back(got[i].size());
        stopped.push_back(int64_t(got[i].size()) < a->max_new);
        total_new += int64_t(got[i].size());
      }
      nlohmann::json summary = {
          {"sequences", n},
          {"max_batch", o.max_batch},
          {"prompt_tokens", prompt_tokens},
          {"new_tokens", new_tokens},
          {"stopped_at_eos", stopped},
          {"first_step_ms", times.first_ms},  // the first prompts' prefill and first draws
          {"decode_ms", times.decode_ms},     // every later step (later prompts' prefill included)
          {"decode_tokens", times.decode_tokens},
          {"decode_tokens_per_s", times.decode_ms > 0 ? double(times.decode_tokens) / times.decode_ms * 1e3 : 0.0},
          {"total_new_tokens", total_new},
          {"weights", infer::weight_precision_name(weights)},
          {"kv_cache", attn::kv_precision_name(kv)},
          {"kv_cache_bytes_per_sequence", dec.cache_bytes()},
          {"kv_cache_bytes", dec.cache_bytes() * size_t(o.max_batch)},
          {"peak_rss_bytes", peak_rss_bytes()},
          {"seed", a->sampling.seed},
          {"temperature", a->sampling.temperature}};
      std::fprintf(stderr, "%s\n", summary.dump().c_str());
      return;
    }
    const std::vector<int32_t>& prompt = prompts[0];
    // The cache holds the positions this run uses, not the whole context (32K for Qwen2.5).
    infer::CachedDecoder dec(*model, std::max<int64_t>(int64_t(prompt.size()) + a->max_new - 1, 1), kPrefillChunk, 512,
                       weights, std::move(loaded.half), kv, loaded.fp32_layout);
    infer::Sampler sampler(a->sampling, cfg.vocab_size);
    infer::GenerateTimes times;
    bool first = true;
    data::Utf8Holdback held;
    const auto out = infer::generate(
        dec, sampler, prompt, a->max_new,
        [&](int32_t t) {
          if (tok) {
            const std::string ready = held.push(text_of(t));
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
                              {"kv_cache", attn::kv_precision_name(kv)},
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
