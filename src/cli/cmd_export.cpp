// headwise export --checkpoint CKPT --out DIR [--dtype fp32|bf16|fp16]
// Writes any checkpoint headwise reads (its own, or a Hugging Face directory) as a folder that
// transformers opens: model.safetensors (shards above 2 GiB) in the chosen dtype, config.json,
// the adapters if it has any, and for a mixed plan the PyTorch model's Python files
// (remote_code.hpp: AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)). The
// tokenizer and generation files beside the input are copied. DIR appears complete or not at all.
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

namespace hw::cli {

namespace {
namespace fs = std::filesystem;

struct ExportArgs {
  std::string checkpoint, out, dtype = "fp32";
};

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a checkpoint as a folder transformers opens (a mixed plan with its PyTorch model files)");
  cmd->add_option("--checkpoint", a->checkpoint, "Input checkpoint directory")->required();
  cmd->add_option("--out", a->out, "Output directory (written atomically)")->required();
  cmd->add_option("--dtype", a->dtype, "Weights' dtype in the files: fp32, bf16 or fp16 (default fp32; head-kind "
                                       "values and adapters stay fp32)");
  cmd->callback([a] {
    check(a->dtype == "fp32" || a->dtype == "bf16" || a->dtype == "fp16",
          "--dtype must be fp32, bf16 or fp16, got '" + a->dtype + "'");
    check(fs::is_directory(a->checkpoint), "--checkpoint " + a->checkpoint + ": no such directory");
    check(!fs::exists(a->out) || !fs::equivalent(a->checkpoint, a->out),
          "--out must not be the input checkpoint (" + a->checkpoint + ")");
    const DType dt = a->dtype == "bf16" ? DType::BF16 : a->dtype == "fp16" ? DType::F16 : DType::F32;
    auto model = load_model(a->checkpoint, cpu_backend<float>(), /*trainable=*/false);
    const std::string tmp = a->out + ".tmp";
    io::fresh_dir(tmp);
    SaveOptions save;
    save.dtype = dt;
    save_model_files(*model, tmp, save);
    const std::vector<std::string> copied = copy_side_files(a->checkpoint, tmp);
    io::replace_dir_atomic(tmp, a->out);
    const ModelConfig& c = model->config();
    const nlohmann::json summary = {{"out", a->out},
                                    {"family", c.family},
                                    {"model_type", c.head_plan.all_softmax() ? c.family : "headwise"},
                                    {"dtype", a->dtype},
                                    {"adapters", c.lora.enabled()},
                                    {"copied", copied}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace hw::cli
