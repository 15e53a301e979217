// headwise convert --checkpoint IN --out OUT --method NAME [--set method.key=value]... [--calib GLOB] [--seq-len T]
//                  [--dtype auto|fp32|bf16|fp16]
// Applies one registered method to a finished checkpoint, with no training: loads
// the model, builds the method's planner through the registry (method_registry.hpp) for a run
// whose model is the checkpoint's and whose data section holds at most data.calib = --calib
// (the calibration data of methods that calibrate), lets it act once (at the
// first update it would act at), installs the plan change and writes OUT (model.safetensors and
// config.json as the trainer writes them, the input's tokenizer files, plus convert.json: what
// changed and the planner's report). OUT appears complete or not at all. Methods that calibrate stop with one error line
// when --calib is missing; methods that observe training forwards always do.
// Memory: the model is loaded without gradients (unless the method runs backward passes), and
// only the tensors the method reads (Planner::weights_read); weights are written in the dtype
// they were read in (bf16 in, bf16 out; --dtype to choose), a tensor whose values the method did
// not change copied from IN byte for byte. Stages, their times and peak RSS go to stderr.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "cli/commands.hpp"
#include "cli/data_free_method.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/experiment/experiment.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/folder_lock.hpp"
#include "headwise/io/safetensors_set.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
namespace fs = std::filesystem;

struct ConvertArgs {
  std::string checkpoint, out, method, calib, dtype = "auto";
  std::vector<std::string> sets;
  int64_t seq_len = 0;
};

// The process's peak resident memory so far in GB (-1 where /proc cannot tell). Never reset:
// a reset would also reset what `time -v` and wait4 report for the whole run.
double stage_peak_gb() {
  const int64_t hwm = peak_rss_bytes();
  return hwm >= 0 ? double(hwm) / 1e9 : -1.0;
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "auto") return std::nullopt;
  if (s == "fp32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "fp16") return DType::F16;
  fail("--dtype must be auto, fp32, bf16 or fp16, got '" + s + "'");
}

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
  cmd->add_option("--dtype", a->dtype,
                  "Dtype of the written weights: auto (each as the checkpoint stored it: bf16 in, bf16 out), "
                  "fp32, bf16 or fp16; weights the method did not change are copied as they were when their "
                  "dtype is kept (default auto)");
  cmd->callback([a] {
    const std::string who = "convert --method " + a->method;
    check(fs::exists(a->checkpoint), "--checkpoint " + a->checkpoint + ": no such directory");
    check(!fs::exists(a->out) || !fs::equivalent(a->checkpoint, a->out),
          "--out must not be the input checkpoint (" + a->checkpoint + ")");
    // One writer per output (folder_lock.hpp): OUT is replaced whole by a rename, so the lock
    // is OUT.lock beside it, held from here to the rename.
    const io::FolderLock lock = io::FolderLock::beside(a->out, "convert");
    const std::optional<DType> out_dtype = parse_dtype(a->dtype);
    Stopwatch stage;
    // A conversion calibrates the finished model as it will be used: without the dropout a
    // Hugging Face config carries for training (GPT-2's 0.1s). The converted config has none.
    ModelConfig loaded = read_checkpoint_config(a->checkpoint);
    if (loaded.attn_pdrop > 0 || loaded.any_dropout()) {
      std::printf("%s: dropout off (the checkpoint's attn_pdrop %g, resid_pdrop %g, embd_pdrop %g are training "
                  "settings; the converted config has 0)\n",
                  who.c_str(), loaded.attn_pdrop, loaded.resid_pdrop, loaded.embd_pdrop);
      loaded.attn_pdrop = loaded.resid_pdrop = loaded.embd_pdrop = 0.0;
    }
    DataFreeMethod prepared = prepare_data_free_method(loaded, a->method, a->sets, who, a->calib, a->seq_len);
    // Only what the method reads, and gradients only for a method that runs backward passes.
    const std::optional<std::set<std::string>> reads = prepared.planner->weights_read(loaded);
    auto model = load_model(a->checkpoint, loaded, cpu_backend<float>(), prepared.planner->needs_gradients(),
                            reads ? &*reads : nullptr);
    const double load_seconds = stage.seconds(), load_gb = stage_peak_gb();
    const ModelConfig before = model->config();
    const DataFreeChange applied = apply_data_free_method(*model, prepared);
    const double method_gb = stage_peak_gb();
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
    stage.restart();
    const std::string tmp = a->out + ".tmp";
    io::fresh_dir(tmp);
    const io::SafetensorsSet source(a->checkpoint);
    SaveOptions save;
    save.source = &source;
    save.dtype = out_dtype;
    for (const auto& s : model->specs())
      if (reads && !s.head_value && !s.is_int && !s.adapter && !reads->count(s.name)) save.unread.insert(s.name);
    save_model_files(*model, tmp, save);
    copy_side_files(a->checkpoint, tmp);  // the converted model keeps its tokenizer
    io::write_file_atomic(tmp + "/convert.json", record.dump(2) + "\n");
    io::replace_dir_atomic(tmp, a->out);
    const double write_seconds = stage.seconds(), write_gb = stage_peak_gb();
    const double method_seconds = applied.act_seconds + applied.install_seconds;
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
      std::snprintf(buf, sizeof buf, ", method %.1f s", applied.act_seconds);
      stages = buf;
    } else if (applied.act_seconds - named > 0.05) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ", other %.1f s", applied.act_seconds - named);
      stages += buf;
    }
    // One line: each stage's time, then the peak resident memory so far after the load, the
    // method (its stages and the install) and the write.
    std::fprintf(stderr,
                 "convert: load %.1f s%s, install %.1f s, write %.1f s; peak RSS %.2f GB (after load %.2f, method "
                 "%.2f)\n",
                 load_seconds, stages.c_str(), applied.install_seconds, write_seconds, write_gb, load_gb, method_gb);

    nlohmann::json summary = {{"out", a->out},
                              {"method", a->method},
                              {"changed_heads", changed.size()},
                              {"layout_kept", kept},
                              {"peak_rss_bytes", peak_rss_bytes()},
                              {"head_plan", after.head_plan.to_json()}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::cli
