// headwise aah-table --experiment DIR [--table 4|5|6] [--batches N] [--micro-batch B] [--json FILE]:
// the paper's Table 4, 5 or 6 layout (tables.hpp) from a finished `headwise experiment`
// directory, as markdown on stdout and optionally JSON.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "headwise/methods/aah/tables.hpp"

namespace hw::aah {

void add_commands(CLI::App& app) {
  struct Opts {
    std::string dir, json;
    int table = 4;
    int64_t batches = 8, micro_batch = 4;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "aah-table", "AAH: the paper's Table 4 (training), 5 (screening ablations) or 6 (inference) of an experiment");
  cmd->add_option("--experiment", o->dir, "A finished `headwise experiment` output directory")->required();
  cmd->add_option("--table", o->table, "4: val loss, ACR, tok/s, memory; 5: val loss vs the first row; "
                                       "6: forward-only val loss, PPL, ACR, tok/s of the final checkpoints (default 4)");
  cmd->add_option("--batches", o->batches, "Table 6: validation micro-batches per checkpoint (default 8)");
  cmd->add_option("--micro-batch", o->micro_batch, "Table 6: sequences per micro-batch (default 4)");
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  cmd->callback([o] {
    check(o->table >= 4 && o->table <= 6, "--table must be 4, 5 or 6, got " + std::to_string(o->table));
    const nlohmann::json rows = o->table == 4   ? table4_rows(o->dir)
                                : o->table == 5 ? table5_rows(o->dir)
                                                : table6_rows(o->dir, o->batches, o->micro_batch);
    std::printf("%s", (o->table == 4   ? table4_markdown(rows)
                       : o->table == 5 ? table5_markdown(rows)
                                       : table6_markdown(rows))
                          .c_str());
    if (!o->json.empty()) io::write_file_atomic(o->json, rows.dump(2) + "\n");
  });
}

}  // namespace hw::aah
