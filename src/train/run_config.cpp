#include "headwise/train/run_config.hpp"

#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"

namespace hw {

namespace {

TrainConfig parse_train(const nlohmann::json& j) {
  TrainConfig t;
  JsonFields f(j, "train");
  f.get("micro_batch", t.micro_batch);
  f.get("seq_len", t.seq_len);
  f.get("total_batch_tokens", t.total_batch_tokens);
  f.get("steps", t.steps);
  f.get("lr", t.lr);
  f.get("min_lr", t.min_lr);
  f.get("warmup_steps", t.warmup_steps);
  f.get("weight_decay", t.weight_decay);
  f.get("beta1", t.beta1);
  f.get("beta2", t.beta2);
  f.get("adam_eps", t.adam_eps);
  f.get("grad_clip", t.grad_clip);
  f.get("seed", t.seed);
  f.get("eval_every", t.eval_every);
  f.get("eval_batches", t.eval_batches);
  f.get("checkpoint_every", t.checkpoint_every);
  f.get("log_every", t.log_every);
  f.get("device", t.device);
  f.get("tf32", t.tf32);
  f.get("precision", t.precision);
  f.get("classifier_chunk_rows", t.classifier_chunk_rows);
  f.get("recompute_gelu", t.recompute_gelu);
  f.get("threads", t.threads);
  f.get("zero1", t.zero1);
  f.get("comm", t.comm);
  f.finish();
  auto positive = [](int64_t v, const char* key) {
    check(v > 0, std::string("train.") + key + " must be positive, got " + std::to_string(v));
  };
  positive(t.micro_batch, "micro_batch");
  positive(t.seq_len, "seq_len");
  positive(t.steps, "steps");
  positive(t.eval_batches, "eval_batches");
  positive(t.log_every, "log_every");
  check(t.total_batch_tokens >= 0, "train.total_batch_tokens must be >= 0");
  check(t.warmup_steps >= 0, "train.warmup_steps must be >= 0");
  check(t.eval_every >= 0 && t.checkpoint_every >= 0, "train.eval_every and train.checkpoint_every must be >= 0");
  check(t.lr > 0 && t.min_lr >= 0 && t.min_lr <= t.lr, "train.lr must be positive and train.min_lr in [0, lr]");
  check(t.beta1 >= 0 && t.beta1 < 1 && t.beta2 >= 0 && t.beta2 < 1, "train.beta1 and train.beta2 must be in [0, 1)");
  check(t.adam_eps > 0, "train.adam_eps must be positive");
  check(t.weight_decay >= 0 && t.grad_clip >= 0, "train.weight_decay and train.grad_clip must be >= 0");
  check(t.threads >= 0, "train.threads must be >= 0");
  check(t.device == "cpu" || t.device == "cuda", "train.device must be \"cpu\" or \"cuda\", got \"" + t.device + "\"");
  check(t.precision == "fp32" || t.precision == "bf16",
        "train.precision must be \"fp32\" or \"bf16\", got \"" + t.precision + "\"");
  check(t.classifier_chunk_rows >= 0, "train.classifier_chunk_rows must be >= 0 (0 = the whole micro-batch), got " +
                                          std::to_string(t.classifier_chunk_rows));
  check(t.comm == "auto" || t.comm == "local" || t.comm == "mpi" || t.comm == "nccl",
        "train.comm must be auto, local, mpi or nccl, got \"" + t.comm + "\"");
  return t;
}

DataConfig parse_data(const nlohmann::json& j) {
  DataConfig d;
  JsonFields f(j, "data");
  f.get("train", d.train);
  f.get("val", d.val);
  f.get("calib", d.calib);
  f.get("shuffle", d.shuffle);
  f.finish();
  return d;
}

MethodConfig parse_method(const nlohmann::json& j) {
  MethodConfig m;
  JsonFields f(j, "method");
  f.get("name", m.name);
  f.get("ratio", m.ratio);
  f.get("at_fraction", m.at_fraction);
  f.get("at_step", m.at_step);
  f.get("calib_seqs", m.calib_seqs);
  f.get("calib_seq_len", m.calib_seq_len);
  f.get("selector", m.selector);
  f.get("pattern", m.pattern);
  f.get("mode", m.mode);
  f.get("fit_steps", m.fit_steps);
  f.get("fit_lr", m.fit_lr);
  f.get("max_kl", m.max_kl);
  f.get("seed", m.seed);
  f.get("memory_budget_mb", m.memory_budget_mb);
  f.finish();
  check(m.name == "none" || m.name == "saf", "method.name must be \"none\" or \"saf\", got \"" + m.name + "\"");
  check(m.ratio >= 0 && m.ratio <= 1, "method.ratio must be in [0, 1]");
  check(m.at_fraction >= 0 && m.at_fraction <= 1, "method.at_fraction must be in [0, 1]");
  check(m.calib_seqs >= 2, "method.calib_seqs must be >= 2 (variance needs two samples)");
  check(m.calib_seq_len >= 0, "method.calib_seq_len must be >= 0");
  check(m.selector == "variance" || m.selector == "kl" || m.selector == "random" || m.selector == "gate_taylor",
        "method.selector must be variance, kl, random or gate_taylor, got \"" + m.selector + "\"");
  check(m.pattern == "mean" || m.pattern == "sharp_mean" || m.pattern == "gaussian" || m.pattern == "dirichlet" ||
            m.pattern == "structured_random",
        "method.pattern must be mean, sharp_mean, gaussian, dirichlet or structured_random, got \"" + m.pattern +
            "\"");
  check(m.mode == "freeze" || m.mode == "prune", "method.mode must be freeze or prune, got \"" + m.mode + "\"");
  check(m.fit_steps >= 0 && m.fit_lr > 0 && m.max_kl > 0, "method.fit_steps, fit_lr and max_kl must be positive");
  return m;
}

}  // namespace

int64_t RunConfig::grad_accum(int world) const {
  const int64_t micro_tokens = train.micro_batch * train.seq_len * world;
  const int64_t total = train.total_batch_tokens > 0 ? train.total_batch_tokens : micro_tokens;
  check(total % micro_tokens == 0, "train.total_batch_tokens (" + std::to_string(total) +
                                       ") must be a multiple of micro_batch * seq_len * ranks (" +
                                       std::to_string(micro_tokens) + ")");
  return total / micro_tokens;
}

RunConfig RunConfig::from_json(const nlohmann::json& doc) {
  check(doc.is_object(), "config must be a JSON object with sections model, train, data, method");
  for (auto it = doc.begin(); it != doc.end(); ++it)
    check(it.key() == "model" || it.key() == "train" || it.key() == "data" || it.key() == "method",
          "unknown config section '" + it.key() + "' (expected model, train, data, method)");
  RunConfig rc;
  static const nlohmann::json empty = nlohmann::json::object();
  rc.model = ModelConfig::from_json(doc.contains("model") ? doc["model"] : empty);
  rc.train = parse_train(doc.contains("train") ? doc["train"] : empty);
  rc.data = parse_data(doc.contains("data") ? doc["data"] : empty);
  rc.method = parse_method(doc.contains("method") ? doc["method"] : empty);
  check(rc.train.seq_len <= rc.model.block_size, "train.seq_len (" + std::to_string(rc.train.seq_len) +
                                                     ") exceeds model.block_size (" +
                                                     std::to_string(rc.model.block_size) + ")");
  rc.grad_accum();  // validates total_batch_tokens
  rc.source = doc;
  return rc;
}

RunConfig RunConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json doc = read_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  try {
    return from_json(doc);
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
}

nlohmann::json RunConfig::to_json() const {
  nlohmann::json j;
  j["model"] = model.to_json();
  j["train"] = {{"micro_batch", train.micro_batch},
                {"seq_len", train.seq_len},
                {"total_batch_tokens", train.total_batch_tokens},
                {"steps", train.steps},
                {"lr", train.lr},
                {"min_lr", train.min_lr},
                {"warmup_steps", train.warmup_steps},
                {"weight_decay", train.weight_decay},
                {"beta1", train.beta1},
                {"beta2", train.beta2},
                {"adam_eps", train.adam_eps},
                {"grad_clip", train.grad_clip},
                {"seed", train.seed},
                {"eval_every", train.eval_every},
                {"eval_batches", train.eval_batches},
                {"checkpoint_every", train.checkpoint_every},
                {"log_every", train.log_every},
                {"device", train.device},
                {"tf32", train.tf32},
                {"precision", train.precision},
                {"classifier_chunk_rows", train.classifier_chunk_rows},
                {"recompute_gelu", train.recompute_gelu},
                {"threads", train.threads},
                {"zero1", train.zero1},
                {"comm", train.comm}};
  j["data"] = {{"train", data.train}, {"val", data.val}, {"calib", data.calib}, {"shuffle", data.shuffle}};
  j["method"] = {{"name", method.name},
                 {"ratio", method.ratio},
                 {"at_fraction", method.at_fraction},
                 {"at_step", method.at_step},
                 {"calib_seqs", method.calib_seqs},
                 {"calib_seq_len", method.calib_seq_len},
                 {"selector", method.selector},
                 {"pattern", method.pattern},
                 {"mode", method.mode},
                 {"fit_steps", method.fit_steps},
                 {"fit_lr", method.fit_lr},
                 {"max_kl", method.max_kl},
                 {"seed", method.seed},
                 {"memory_budget_mb", method.memory_budget_mb}};
  return j;
}

}  // namespace hw
