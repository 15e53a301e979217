// headwise convert --checkpoint IN --out OUT --method NAME [--set method.key=value]... [--calib GLOB] [--seq-len T]
// Applies one registered method to a finished checkpoint, with no training: loads
// the model, builds the method's planner through the registry (method_registry.hpp) for a run
// whose model is the checkpoint's and whose data section holds at most data.calib = --calib
// (the calibration data of methods that calibrate), lets it act once (at the
// first update it would act at), installs the plan change and writes OUT (model.safetensors and
// config.json as the trainer writes them, the input's tokenizer files, plus convert.json: what
// changed and the planner's report). OUT appears complete or not at all. Methods that calibrate stop with one error line
// when --calib is missing; methods that observe training forwards always do.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/data_free_method.hpp"
#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
namespace fs = std::filesystem;

struct ConvertArgs {
  std::string checkpoint, out, method, calib;
  std::vector<std::string> sets;
  int64_t seq_len = 0;
};

}  // namespace

void add_convert_command(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Apply a method to a finished checkpoint (no training) and write the converted checkpoint");
  cmd->add_option("--checkpoint", a->checkpoint, "Input checkpoint directory")->required();
  cmd->add_option("--out", a->out, "Output checkpoint directory (written atomically)")->required();
  cmd->add_option("--method", a->method, "Method name (method.name); one of the methods in docs/methods/")->required();
  cmd->add_option("--set", a->sets, "A method key: method.key=value (repeatable)");
  cmd->add_option("--calib", a->calib, "Token shard glob a calibrating method reads (data.calib)");
  cmd->add_option("--seq-len", a->seq_len,
                  "Context the converted model is meant for (train.seq_len; default model.block_size): a "
                  "calibrating method calibrates at it unless its own keys say otherwise");
  cmd->callback([a] {
    const std::string who = "convert --method " + a->method;
    check(fs::exists(a->checkpoint), "--checkpoint " + a->checkpoint + ": no such directory");
    check(!fs::exists(a->out) || !fs::equivalent(a->checkpoint, a->out),
          "--out must not be the input checkpoint (" + a->checkpoint + ")");
    // One writer per output (folder_lock.hpp): OUT is replaced whole by a rename, so the lock
    // is OUT.lock beside it, held from here to the rename.
    const io::FolderLock lock = io::FolderLock::beside(a->out, "convert");
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto t0 = Clock::now();
    // A conversion calibrates the finished model as it will be used: without the dropout a
    // Hugging Face config carries for training (GPT-2's 0.1s). The converted config has none.
    ModelConfig loaded = read_checkpoint_config(a->checkpoint);
    if (loaded.attn_pdrop > 0 || loaded.any_dropout()) {
      std::printf("%s: dropout off (the checkpoint's attn_pdrop %g, resid_pdrop %g, embd_pdrop %g are training "
                  "settings; the converted config has 0)\n",
                  who.c_str(), loaded.attn_pdrop, loaded.resid_pdrop, loaded.embd_pdrop);
      loaded.attn_pdrop = loaded.resid_pdrop = loaded.embd_pdrop = 0.0;
    }
    auto model = load_model(a->checkpoint, loaded, cpu_backend<float>());
    const double load_seconds = since(t0);
    const ModelConfig before = model->config();
    t0 = Clock::now();
    const DataFreeChange applied = apply_data_free_method(*model, a->method, a->sets, who, a->calib, a->seq_len);
    const double method_seconds = since(t0);
    const std::optional<PlanChange>& change = applied.change;
    const bool kept = applied.layout_kept;
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
                             {"calib", a->calib},
                             {"seq_len", a->seq_len},
                             {"method", applied.method},
                             {"step", applied.step},
                             {"changed", changed},
                             {"layout_kept", kept},
                             {"head_plan_before", before.head_plan.to_json()},
                             {"head_plan", after.head_plan.to_json()},
                             {"report", change ? change->report : nlohmann::json(nullptr)}};

    // Everything goes to OUT.tmp first; OUT is replaced only once it is complete.
    t0 = Clock::now();
    const std::string tmp = a->out + ".tmp";
    io::fresh_dir(tmp);
    save_model_files(*model, tmp);
    copy_side_files(a->checkpoint, tmp);  // the converted model keeps its tokenizer
    io::write_file_atomic(tmp + "/convert.json", record.dump(2) + "\n");
    io::replace_dir_atomic(tmp, a->out);
    const double write_seconds = since(t0);
    std::printf("time: load %.2f s, method %.2f s, write %.2f s\n", load_seconds, method_seconds, write_seconds);
    // Per stage on stderr: the method's own stages (report "stages": calibration, selection, fit
    // ...) when it names them, else its whole time.
    std::string stages;
    double named = 0.0;
    if (change && change->report.is_object() && change->report.contains("stages"))
      for (const auto& st : change->report["stages"]) {
        const double sec = st.value("seconds", 0.0);
        named += sec;
        char buf[160];
        const int64_t windows = st.value("windows", int64_t(-1));
        if (windows >= 0)
          std::snprintf(buf, sizeof buf, ", %s %.1f s (%lld windows)", st.value("stage", "?").c_str(), sec,
                        static_cast<long long>(windows));
        else
          std::snprintf(buf, sizeof buf, ", %s %.1f s", st.value("stage", "?").c_str(), sec);
        stages += buf;
      }
    if (stages.empty()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ", method %.1f s", method_seconds);
      stages = buf;
    } else if (method_seconds - named > 0.05) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ", other %.1f s", method_seconds - named);
      stages += buf;
    }
    std::fprintf(stderr, "convert: load %.1f s%s, write %.1f s\n", load_seconds, stages.c_str(), write_seconds);

    nlohmann::json summary = {{"out", a->out},
                              {"method", a->method},
                              {"changed_heads", changed.size()},
                              {"layout_kept", kept},
                              {"head_plan", after.head_plan.to_json()}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::cli
