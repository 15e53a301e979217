#include "headwise/train/run_config.hpp"

#include <filesystem>

#include "headwise/core/checked_math.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
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
  f.get("keep_best", t.keep_best);
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
  // Upper bounds (TrainLimits): far above any run, low enough that the batch products and step
  // counters below fit in 64 bits.
  using T = TrainLimits;
  auto in_range = [](int64_t v, int64_t lo, int64_t hi, const char* key) {
    check(v >= lo && v <= hi, std::string("train.") + key + " must be in " + std::to_string(lo) + ".." +
                                  std::to_string(hi) + ", got " + std::to_string(v));
  };
  in_range(t.micro_batch, 1, T::kMaxMicroBatch, "micro_batch");
  in_range(t.seq_len, 1, T::kMaxSeqLen, "seq_len");
  in_range(t.steps, 1, T::kMaxSteps, "steps");
  in_range(t.eval_batches, 1, T::kMaxSteps, "eval_batches");
  in_range(t.log_every, 1, T::kMaxSteps, "log_every");
  in_range(t.total_batch_tokens, 0, T::kMaxBatchTokens, "total_batch_tokens");
  in_range(t.warmup_steps, 0, T::kMaxSteps, "warmup_steps");
  in_range(t.eval_every, 0, T::kMaxSteps, "eval_every");
  in_range(t.checkpoint_every, 0, T::kMaxSteps, "checkpoint_every");
  check(t.micro_batch * t.seq_len <= T::kMaxMicroBatchTokens,
        "train.micro_batch * train.seq_len (" + std::to_string(t.micro_batch * t.seq_len) + ") must be at most " +
            std::to_string(T::kMaxMicroBatchTokens) + " tokens");
  check(t.lr > 0 && t.min_lr >= 0 && t.min_lr <= t.lr, "train.lr must be positive and train.min_lr in [0, lr]");
  check(t.beta1 >= 0 && t.beta1 < 1 && t.beta2 >= 0 && t.beta2 < 1, "train.beta1 and train.beta2 must be in [0, 1)");
  check(t.adam_eps > 0, "train.adam_eps must be positive");
  check(t.weight_decay >= 0 && t.grad_clip >= 0, "train.weight_decay and train.grad_clip must be >= 0");
  check(t.threads >= 0 && t.threads <= 4096, "train.threads must be in 0..4096");
  check(t.device == "cpu" || t.device == "cuda", "train.device must be \"cpu\" or \"cuda\", got \"" + text_brief(t.device) + "\"");
  check(t.precision == "fp32" || t.precision == "bf16",
        "train.precision must be \"fp32\" or \"bf16\", got \"" + text_brief(t.precision) + "\"");
  check(t.classifier_chunk_rows >= 0 && t.classifier_chunk_rows <= T::kMaxMicroBatchTokens, "train.classifier_chunk_rows must be >= 0 (0 = the whole micro-batch), got " +
                                          std::to_string(t.classifier_chunk_rows));
  check(t.comm == "auto" || t.comm == "local" || t.comm == "mpi" || t.comm == "nccl",
        "train.comm must be auto, local, mpi or nccl, got \"" + text_brief(t.comm) + "\"");
  return t;
}

DataConfig parse_data(const nlohmann::json& j) {
  DataConfig d;
  JsonFields f(j, "data");
  f.get("train", d.train);
  f.get("val", d.val);
  f.get("calib", d.calib);
  f.get("shuffle", d.shuffle);
  f.get("val_split", d.val_split);
  f.finish();
  check(d.val_split == "none" || d.val_split == "halves",
        "data.val_split must be \"none\" or \"halves\", got \"" + text_brief(d.val_split) + "\"");
  check(d.val_split == "none" || !d.val.empty(),
        "data.val_split = \"halves\" splits data.val, which is not set");
  return d;
}

std::vector<nlohmann::json> parse_methods(const nlohmann::json& j) {
  auto entry = [](const nlohmann::json& m, const std::string& where) {
    check(m.is_object(), where + " must be a JSON object with a \"name\"");
    check(m.contains("name") && m["name"].is_string(), where + ": missing string key 'name' (the method)");
  };
  std::vector<nlohmann::json> out;
  if (j.is_array()) {
    check(!j.empty(), "method: an empty list (leave the section out, or {\"name\": \"none\"})");
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string where = "method[" + std::to_string(i) + "]";
      entry(j[i], where);
      check(j[i]["name"] != "none", where + ".name = \"none\" in a list: leave the entry out");
      out.push_back(j[i]);
    }
    return out;
  }
  if (j.is_object() && j.empty()) return out;
  entry(j, "method");
  if (j["name"] == "none") {
    for (auto it = j.begin(); it != j.end(); ++it)
      check(it.key() == "name", "method." + it.key() + ": method \"none\" has no keys");
    return out;
  }
  out.push_back(j);
  return out;
}

}  // namespace

int64_t RunConfig::grad_accum(int world) const {
  check(world >= 1, "internal: world size " + std::to_string(world));
  // Checked: micro_batch and seq_len may come from --set or a file unvalidated (from_json checks them).
  const int64_t micro_tokens = checked_mul(checked_mul(train.micro_batch, train.seq_len, "train.micro_batch * seq_len"),
                                           int64_t(world), "train.micro_batch * seq_len * ranks");
  check(micro_tokens > 0, "train.micro_batch and train.seq_len must be positive");
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
  rc.methods = parse_methods(doc.contains("method") ? doc["method"] : empty);
  check(rc.train.seq_len <= rc.model.block_size, "train.seq_len (" + std::to_string(rc.train.seq_len) +
                                                     ") exceeds model.block_size (" +
                                                     std::to_string(rc.model.block_size) + ")");
  rc.grad_accum();  // validates total_batch_tokens
  rc.source = doc;
  return rc;
}

RunConfig RunConfig::load(const std::string& path, const std::vector<std::string>& overrides,
                          const ModelConfig* init_model, const std::string& init_from) {
  nlohmann::json doc = read_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  try {
    if (init_model)
      doc["model"] = init_model->merged_section(doc.contains("model") ? doc["model"] : nlohmann::json(),
                                                "the checkpoint " + init_from);
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
                {"keep_best", train.keep_best},
                {"log_every", train.log_every},
                {"device", train.device},
                {"tf32", train.tf32},
                {"precision", train.precision},
                {"classifier_chunk_rows", train.classifier_chunk_rows},
                {"recompute_gelu", train.recompute_gelu},
                {"threads", train.threads},
                {"zero1", train.zero1},
                {"comm", train.comm}};
  j["data"] = {{"train", data.train}, {"val", data.val}, {"calib", data.calib}, {"shuffle", data.shuffle},
               {"val_split", data.val_split}};
  if (methods.empty())
    j["method"] = {{"name", "none"}};
  else if (methods.size() == 1)
    j["method"] = methods.front();
  else
    j["method"] = methods;
  return j;
}

}  // namespace hw
