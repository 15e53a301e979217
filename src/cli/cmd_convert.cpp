// headwise convert --checkpoint IN --out OUT --method NAME [--set method.key=value]...
// Applies one registered method to a finished checkpoint, with no data and no training: loads
// the model, builds the method's planner through the registry (method_registry.hpp) for a run
// whose model is the checkpoint's and whose data section is empty, lets it act once (at the
// first update it would act at), installs the plan change and writes OUT (model.safetensors and
// config.json as the trainer writes them, plus convert.json: what changed and the planner's
// report). OUT appears complete or not at all. Methods that need data (calibration, observed
// training forwards) stop with one error line saying so.
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
namespace fs = std::filesystem;

struct ConvertArgs {
  std::string checkpoint, out, method;
  std::vector<std::string> sets;
};

std::string method_names() {
  std::string names;
  for (const auto& e : method_table()) names += (names.empty() ? "" : ", ") + e.name;
  return names.empty() ? "none" : names;
}
}  // namespace

void add_convert_command(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Apply a data-free method to a finished checkpoint and write the converted checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "Input checkpoint directory")->required();
  cmd->add_option("--out", a->out, "Output checkpoint directory (written atomically)")->required();
  cmd->add_option("--method", a->method, "Method name (method.name); the data-free ones are listed in the README's Methods section")->required();
  cmd->add_option("--set", a->sets, "A method key: method.key=value (repeatable)");
  cmd->callback([a] {
    const std::string who = "convert --method " + a->method;
    for (const auto& s : a->sets)
      check(s.rfind("method.", 0) == 0, "--set takes method.<key>=value (convert reads no data and trains nothing), got '" +
                                            s + "'");
    check(fs::exists(a->checkpoint), "--checkpoint " + a->checkpoint + ": no such directory");
    check(!fs::exists(a->out) || !fs::equivalent(a->checkpoint, a->out),
          "--out must not be the input checkpoint (" + a->checkpoint + ")");
    auto model = load_model(a->checkpoint, cpu_backend<float>());
    const ModelConfig before = model->config();

    // The run the planner is built for: the checkpoint's model, no data, default schedule length.
    nlohmann::json doc = {{"model", before.to_json()},
                          {"train", {{"seq_len", before.block_size}, {"micro_batch", 1}}},
                          {"method", {{"name", a->method}}}};
    for (const auto& s : a->sets) apply_override(doc, s);
    check(doc["method"]["name"] == a->method, "--set method.name is --method's job");
    const RunConfig cfg = RunConfig::from_json(doc);
    check(cfg.methods.size() == 1, who + ": not a method (available: " + method_names() + ")");

    std::unique_ptr<Planner> planner;
    int64_t step = -1;
    std::optional<PlanChange> change;
    dist::LocalComm comm;
    try {
      planner = find_method(a->method, "method").make(cfg.methods[0], "method", cfg);
      for (int64_t s = 0; s <= cfg.train.steps && step < 0; ++s) {
        check(!planner->observes_at(s), "the method observes training forwards (it needs data); convert runs none");
        if (planner->acts_at(s)) step = s;
      }
      check(step >= 0, "the method never acts within train.steps = " + std::to_string(cfg.train.steps));
      PlannerContext ctx{*model, cfg, comm, step};
      change = planner->act(ctx);
    } catch (const Error& e) {
      fail(who + ": " + e.what());
    }

    bool kept = true;
    if (change) kept = model->install_plan(change->plan, change->extras);
    if (change && change->adapters) {  // fresh adapters (B = 0), drawn as a run's at this step would be
      model->add_adapters(*change->adapters, adapter_init_seed(cfg.train.seed, step));
      kept = false;
    }
    const ModelConfig& after = model->config();
    nlohmann::json changed = nlohmann::json::array();
    std::printf("%s: %s -> %s\n", who.c_str(), a->checkpoint.c_str(), a->out.c_str());
    for (int l = 0; l < after.n_layer; ++l)
      for (int h = 0; h < after.n_head; ++h) {
        const auto &b = before.head_plan.layers[size_t(l)][size_t(h)], &n = after.head_plan.layers[size_t(l)][size_t(h)];
        if (b == n) continue;
        std::printf("  layer %d head %d: %s -> %s\n", l, h, b.str().c_str(), n.str().c_str());
        changed.push_back({{"layer", l}, {"head", h}, {"from", b.str()}, {"to", n.str()}});
      }
    std::printf("%zu heads changed%s\n", changed.size(), change ? (kept ? ", parameter layout kept" : ", layout moved")
                                                                : " (the method kept the plan)");
    nlohmann::json record = {{"from", a->checkpoint},
                             {"method", planner->config()},
                             {"step", step},
                             {"changed", changed},
                             {"layout_kept", kept},
                             {"head_plan_before", before.head_plan.to_json()},
                             {"head_plan", after.head_plan.to_json()},
                             {"report", change ? change->report : nlohmann::json(nullptr)}};

    // Everything goes to OUT.tmp first; OUT is replaced only once it is complete.
    const std::string tmp = a->out + ".tmp";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    save_model_files(*model, tmp);
    io::write_file_atomic(tmp + "/convert.json", record.dump(2) + "\n");
    io::replace_dir_atomic(tmp, a->out);

    nlohmann::json summary = {{"out", a->out},
                              {"method", a->method},
                              {"changed_heads", changed.size()},
                              {"layout_kept", kept},
                              {"head_plan", after.head_plan.to_json()}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::cli
