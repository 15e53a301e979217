// headwise bench-attention [--T 256,1024,4096] [--head-dim 64] [--batch 1] [--repeats 3]:
// CPU forward+backward time of one head of each kind, as a markdown table and one JSON line.
#include <cstdio>
#include <memory>
#include <vector>

#include "cli/commands.hpp"
#include "headwise/attention/kind_bench.hpp"

namespace hw::cli {

void add_bench_attention_command(CLI::App& app) {
  struct Opts {
    std::vector<int64_t> Ts{256, 1024, 4096};
    int head_dim = 64;
    int64_t batch = 1;
    int repeats = 3;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("bench-attention", "Time one attention head of each kind on the CPU");
  cmd->add_option("--T", o->Ts, "Sequence lengths, comma separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "Head dimension")->capture_default_str();
  cmd->add_option("--batch", o->batch, "Sequences per pass")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed passes per kind (median reported)")->capture_default_str();
  cmd->callback([o] {
    const nlohmann::json rows = attn::bench_attention_kinds(o->Ts, o->head_dim, o->batch, o->repeats);
    std::printf("%s", attn::bench_attention_markdown(rows).c_str());
    std::printf("%s\n", rows.dump().c_str());
  });
}

}  // namespace hw::cli
