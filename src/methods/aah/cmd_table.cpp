// headwise aah-table --experiment DIR [--json FILE]: the paper's Table 4 layout (tables.hpp)
// from a finished `headwise experiment` directory, as markdown on stdout and optionally JSON.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "headwise/io/files.hpp"
#include "headwise/methods/aah/tables.hpp"

namespace hw::aah {

void add_commands(CLI::App& app) {
  struct Opts {
    std::string dir, json;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("aah-table", "AAH: the paper's Table 4 (val loss, ACR, tok/s, memory) of an experiment");
  cmd->add_option("--experiment", o->dir, "A finished `headwise experiment` output directory")->required();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  cmd->callback([o] {
    const nlohmann::json rows = table4_rows(o->dir);
    std::printf("%s", table4_markdown(rows).c_str());
    if (!o->json.empty()) io::write_file_atomic(o->json, rows.dump(2) + "\n");
  });
}

}  // namespace hw::aah
