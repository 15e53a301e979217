// headwise mqar (--checkpoint DIR | --config FILE) --out DIR [--method NAME|JSON] [--method-set k=v]...
//               [sizes...]
// MQAR adaptation (loss on query positions only) and query accuracy per number of pairs.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/run_setup.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/data/mqar/mqar_adapt.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {

struct MqarArgs {
  std::string checkpoint, config, out, label, method = "none";
  std::vector<std::string> sets, method_sets;
  bool save = false;
  int threads = 0;
  MqarOptions opt;
};

// A fresh model from a run config's model section (an "experiment" key is ignored).
std::unique_ptr<Model<float>> fresh_model(const std::string& path, const std::vector<std::string>& sets) {
  nlohmann::json doc = read_json_file(path);
  doc.erase("experiment");
  for (const auto& s : sets) apply_override(doc, s);
  const RunConfig rc = RunConfig::from_json(doc);
  auto m = std::make_unique<Model<float>>(rc.model, cpu_backend<float>());
  m->init_weights(uint64_t(rc.train.seed));
  return m;
}

// --method (a name, or a method object in JSON) with --method-set overrides, as the method
// object a run config's method section would hold; null for "none".
nlohmann::json method_object(const std::string& method, const std::vector<std::string>& sets) {
  nlohmann::json m;
  if (!method.empty() && method.front() == '{') {
    m = parse_json(method, "mqar: --method");
    check(m.is_object(), "mqar: --method is not a JSON object: " + text_brief(method));
  } else {
    m = {{"name", method}};
  }
  check(m.contains("name") && m["name"].is_string(), "mqar: --method needs a \"name\"");
  nlohmann::json doc = {{"method", m}};
  for (const auto& s : sets) apply_override(doc, "method." + s);
  if (doc["method"]["name"] == "none") {
    check(doc["method"].size() == 1, "mqar: --method none takes no --method-set keys");
    return nullptr;
  }
  return doc["method"];
}

}  // namespace

void add_mqar_command(CLI::App& app) {
  auto a = std::make_shared<MqarArgs>();
  CLI::App* cmd = app.add_subcommand("mqar", "MQAR: adapt a model on associative recall, report accuracy per pair count");
  cmd->add_option("--checkpoint", a->checkpoint, "Start from this checkpoint (static/pruned heads included)");
  cmd->add_option("--config", a->config, "Or start from a fresh model of this run config's model section");
  cmd->add_option("--set", a->sets, "Override a key of --config: section.key=value (repeatable)");
  cmd->add_option("--out", a->out, "Output directory (mqar.json, table.md, metrics.jsonl)")->required();
  cmd->add_option("--label", a->label, "Name of this model in the table (default: the method)");
  cmd->add_option("--method", a->method,
                  "Replace heads before adapting, calibrated on MQAR: none (default), a method name, or a method "
                  "object in JSON, as in a config's method section (see docs/methods/)");
  cmd->add_option("--method-set", a->method_sets,
                  "A key of the method: key=value, e.g. ratio=0.25 (repeatable)");
  auto& o = a->opt;
  cmd->add_option("--steps", o.steps, "Adaptation updates (default 1500)");
  cmd->add_option("--batch", o.batch, "Examples per update (default 16)");
  cmd->add_option("--lr", o.lr, "AdamW learning rate, constant after the warm-up (default 1e-4)");
  cmd->add_option("--warmup-steps", o.warmup_steps,
                  "Linear learning-rate warm-up over the first N updates (default 0, the paper's adaptation; "
                  "a model trained from scratch needs ~100)");
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW weight decay (default 0.01)");
  cmd->add_option("--beta2", o.beta2, "AdamW beta2 (default 0.999)");
  cmd->add_option("--grad-clip", o.grad_clip, "Gradient clipping norm (default 1.0; 0 = off)");
  cmd->add_option("--seq-len", o.seq_len, "Example length (default 512)");
  cmd->add_option("--vocab", o.vocab, "MQAR vocabulary (default 8192; at most the model's)");
  cmd->add_option("--train-pairs", o.train_pairs, "Key-value pairs during adaptation (default 8)");
  cmd->add_option("--eval-pairs", o.eval_pairs, "Pair counts to evaluate (default 8,16,24,32,48,64)")->delimiter(',');
  cmd->add_option("--eval-examples", o.eval_examples, "Examples per pair count (default 512)");
  cmd->add_option("--eval-batch", o.eval_batch, "Examples per evaluation forward (default 16)");
  cmd->add_option("--seed", o.seed, "Seed of the example streams (default 1234)");
  cmd->add_option("--log-every", o.log_every, "Log every N updates (default 100)");
  cmd->add_flag("--save-checkpoint", a->save, "Save the adapted model to OUT/adapted");
  cmd->add_option("--threads", a->threads, "OpenMP threads (default: all)");
  cmd->callback([a] {
    check(a->checkpoint.empty() != a->config.empty(), "mqar: give exactly one of --checkpoint and --config");
    const nlohmann::json method = method_object(a->method, a->method_sets);
    if (!method.is_null()) find_method(method["name"].get<std::string>(), "method");  // before any work
    set_threads(a->threads);
    auto model = a->checkpoint.empty() ? fresh_model(a->config, a->sets) : load_model(a->checkpoint, cpu_backend<float>());
    a->opt.validate(model->config());
    const io::FolderLock lock = io::FolderLock::inside(a->out, "mqar");  // one writer per folder; creates --out
    const std::string label = !a->label.empty() ? a->label : method.is_null() ? "none" : method["name"].get<std::string>();
    nlohmann::json result = {{"label", label},
                             {"checkpoint", a->checkpoint},
                             {"config", a->config},
                             {"method", method},
                             {"options",
                              {{"seq_len", a->opt.seq_len}, {"vocab", a->opt.vocab}, {"train_pairs", a->opt.train_pairs},
                               {"steps", a->opt.steps}, {"batch", a->opt.batch}, {"lr", a->opt.lr},
                               {"warmup_steps", a->opt.warmup_steps},
                               {"weight_decay", a->opt.weight_decay}, {"grad_clip", a->opt.grad_clip},
                               {"eval_examples", a->opt.eval_examples}, {"seed", a->opt.seed}}}};
    if (!method.is_null()) {
      dist::LocalComm comm;
      std::optional<PlanChange> change = apply_method_on_mqar(*model, method, a->opt, comm);
      if (change) {
        change->report["head_plan"] = change->plan.to_json();
        io::write_file_atomic(a->out + "/intervention.json", change->report.dump(2) + "\n");
        if (change->report.contains("selected")) result["selected"] = change->report["selected"];
      }
    }
    result["static_heads"] = model->config().head_plan.count(attn::HeadKind::Static);
    result["pruned_heads"] = model->config().head_plan.count(attn::HeadKind::Pruned);
    const Stopwatch timer;
    const std::vector<double> losses = adapt_mqar(*model, a->opt, a->out + "/metrics.jsonl");
    result["adapt_seconds"] = timer.seconds();
    result["final_loss"] = losses.empty() ? nlohmann::json(nullptr) : nlohmann::json(losses.back());
    const std::vector<MqarAccuracy> acc = evaluate_mqar(*model, a->opt);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& x : acc)
      rows.push_back({{"pairs", x.pairs}, {"accuracy", x.accuracy()}, {"correct", x.correct}, {"total", x.total}});
    result["accuracy"] = rows;
    const std::string table = mqar_table_markdown(acc, label);
    io::write_file_atomic(a->out + "/mqar.json", result.dump(2) + "\n");
    io::write_file_atomic(a->out + "/table.md", table);
    if (a->save) {
      io::ensure_dir(a->out + "/adapted");
      save_model_files(*model, a->out + "/adapted");
    }
    std::printf("%s", table.c_str());
    std::printf("%s\n", nlohmann::json{{"label", label}, {"accuracy", rows}}.dump().c_str());
  });
}

}  // namespace hw::cli
