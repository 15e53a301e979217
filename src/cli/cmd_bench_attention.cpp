// headwise bench-attention [--T 256,1024,4096] [--head-dim 64] [--batch 1] [--repeats 3]:
// forward+backward time of one head of each kind on the CPU, as a markdown table and one JSON
// line. With --curve: latency and memory vs T of softmax, linear G=1, linear G=4 and the
// linearization baselines (a linearization paper's latency figure), one head on one thread, optionally written to --csv FILE. With --layer: a whole layer (--heads heads) under several plan compositions, through
// the backend of --device (cpu or cuda), to compare kinds on the GPU kernels.
#include <cstdio>
#include <memory>
#include <vector>

#include "cli/commands.hpp"
#include "cli/layer_attention_bench.hpp"
#include "headwise/attention/kind_bench.hpp"
#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"

namespace hw::cli {

void add_bench_attention_command(CLI::App& app) {
  struct Opts {
    std::vector<int64_t> Ts{256, 1024, 4096};
    int head_dim = 64;
    int64_t batch = 1;
    int repeats = 3;
    bool layer = false;
    int heads = 12;
    std::string device = "cpu";
    std::string precision = "fp32";
    bool curve = false;
    std::string csv;
    std::vector<std::string> kinds;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("bench-attention", "Time attention per head kind (CPU) or per layer plan (--layer)");
  cmd->add_option("--T", o->Ts, "Sequence lengths, comma separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "Head dimension")->capture_default_str();
  cmd->add_option("--batch", o->batch, "Sequences per pass")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed passes (median reported)")->capture_default_str();
  cmd->add_flag("--layer", o->layer, "Time a whole layer under several plan compositions");
  cmd->add_option("--heads", o->heads, "Heads per layer (with --layer)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda (with --layer)")->capture_default_str();
  cmd->add_option("--precision", o->precision, "fp32 or bf16 activations (with --layer)")->capture_default_str();
  cmd->add_flag("--curve", o->curve, "Latency and memory vs T: softmax, linear G=1, linear G=4 and the linearization baselines");
  cmd->add_option("--csv", o->csv, "With --curve: also write the rows to this CSV file");
  cmd->add_option("--kinds", o->kinds, "With --curve: only these kinds, comma separated (e.g. 'softmax,linear G=4')")
      ->delimiter(',');
  cmd->callback([o] {
    check(o->csv.empty() || o->curve, "bench-attention: --csv needs --curve");
    check(o->kinds.empty() || o->curve, "bench-attention: --kinds needs --curve");
    if (o->curve) {
      check(!o->layer, "bench-attention: --curve and --layer are exclusive");
      check(o->device == "cpu", "bench-attention: --curve runs on the CPU only");
      check(o->batch == 1, "bench-attention: --curve times batch 1");
      const nlohmann::json rows = attn::bench_attention_curve(o->Ts, o->head_dim, o->repeats, o->kinds);
      std::printf("%s", attn::bench_curve_markdown(rows).c_str());
      std::printf("%s\n", rows.dump().c_str());
      if (!o->csv.empty()) io::write_file_atomic(o->csv, attn::bench_curve_csv(rows));
      return;
    }
    if (!o->layer) {
      check(o->device == "cpu", "bench-attention: --device " + o->device + " needs --layer");
      const nlohmann::json rows = attn::bench_attention_kinds(o->Ts, o->head_dim, o->batch, o->repeats);
      std::printf("%s", attn::bench_attention_markdown(rows).c_str());
      std::printf("%s\n", rows.dump().c_str());
      return;
    }
    check(o->device == "cpu" || o->device == "cuda", "bench-attention: --device must be cpu or cuda, not '" +
                                                          o->device + "'");
    const Backend<float>& ops = backend_for(o->device == "cuda" ? Device::CUDA : Device::CPU);
    LayerBenchOptions lo;
    lo.Ts = o->Ts;
    lo.n_head = o->heads;
    lo.head_dim = o->head_dim;
    lo.batch = o->batch;
    lo.repeats = o->repeats;
    check(o->precision == "fp32" || o->precision == "bf16",
          "bench-attention: --precision must be fp32 or bf16, not '" + o->precision + "'");
    lo.bf16 = o->precision == "bf16";
    const nlohmann::json rows = bench_layer_attention(ops, lo);
    std::printf("%s", layer_bench_markdown(rows).c_str());
    std::printf("%s\n", rows.dump().c_str());
  });
}

}  // namespace hw::cli
